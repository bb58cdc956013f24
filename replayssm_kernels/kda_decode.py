"""Helion kernels for KDA decode: ReplaySSM (checkpoint + ring) and the standard recurrence.

They mirror ``replayssm_ref.replay`` and ``replayssm_ref.recurrence``; the names (``S0``, ``gamma``,
``kappa``, ``W``, ``u``) are the reference's. The standard kernel is one launch with one program per
(row, value head, V tile) holding the full K width of its state tile.

ReplaySSM never forms the rebuilt state on a non-flush step: it only needs two mat-vecs with it,

    S_pre x = S0 (e^Gamma alpha x) + sum_{i<c} d_i ((W_i alpha kappa_i) . x),    x = q, k,

and everything but ``S0`` and ``d`` lives on the K side. Three designs compute it (``launches=``;
the default, ``None``, runs 2 below the device table's ``split_flush_from_l`` and 3 from it on: L = 8
on the H200, L = 32 on the H100, where two launches with handed ring weights won at L = 8 and 16):

* Two launches. ``_ring_weights_body``, one warp per (row, value head) (or per ``prep_heads`` of
  them: no faster on an H100, run 27), walks the live ``kappa`` /
  ``gamma`` entries once, newest first, and writes to small scratch buffers the 2c scalars ``(W_i alpha kappa_i) . x``
  and the two K-vectors ``e^Gamma alpha x`` (x = q, k, normalised and scaled) with ``q . k``; it
  appends ``k`` and ``g``. ``_replayssm_state_body``, one program per (row, value head, V tile), is
  then the checkpoint tile's two mat-vecs with those vectors plus one ``[c, BV]`` tile of ``d`` times
  those scalars, the output, and either the ``d`` append or, on flush rows, the checkpoint write
  (with ``flush_weights``, from the ring weights ``W_i alpha kappa_i`` that launch 1 stores for
  flush rows: per ring tile two loads and a dot).
  It streams the checkpoint tile in ``[BV, KC]`` chunks through a loop pipelined ``k_stages`` deep
  (a config option), and a ring that fits one tile (``ring_prefetch``) is loaded before that loop
  and reduced after it, so the ring's loads and the checkpoint's are in flight together (runs 20-21
  in ``results/bench/NOTES.md``).
* Three launches: the same two, but the state launch leaves flush rows' checkpoint write to a third
  launch of the same body (``STATE`` / ``FLUSH`` constexprs, ``u`` handed over in a small buffer).
  The state launch then has no flush branch (fewer barriers and layout conversions), at the cost of
  flush rows reading their checkpoint twice: a loss at L = 1-4, where many rows flush every step.
* One fused launch, ``_replayssm_fused_body``. Every K channel of the sum is independent up to the
  final reductions, so it streams K in chunks through a pipelined loop (``range_num_stages``: the
  next chunks' loads are in flight while one is reduced): per chunk, the checkpoint's ``[BV, KC]``
  tile and the ring's ``[LB, KC]`` key side, whose suffix sums give ``W_i`` and ``e^Gamma``. Only
  partial mat-vecs and the 2c partial ring scalars cross chunks; after the loop one ``[LB, BV]`` tile
  of ``d`` times those scalars completes ``S_pre x``. Then the output and the append or flush.
  Slower than two launches at every L timed side by side (run 12 in ``results/bench/NOTES.md``), kept
  for comparison.

In all, flush rows rebuild the state in fp32, ``FK`` channels of K at a time (re-reading the
checkpoint tile, so the rarely taken flush branch does not set every program's register budget), by
the closed form ``S0 e^Gamma alpha + sum_i d_i (W_i alpha kappa_i)^T`` (``precision="fast"``) or by
folding the entries oldest to newest, the recurrence's own order (``"precise"``). The closed form
either walks the ring CH entries at a time or (the ``flush_tiles`` option) takes it a ``[FW, FK]``
tile at a time: a reverse scan gives the tile's ``W_i``, and one fp32 dot adds its ``d_i`` terms.
With ``flush_programs`` a split step's flush launch is ``_flush_rows_body``: a fixed number of
programs sharing the flushing rows' work, instead of a program per row that mostly exits at once.
With ``flush_overlap`` as well, that launch takes the flush rows whole (their output too) and the
state launch skips them, so the two share no data and ``run_launches`` runs them at the same time on
two streams: the flush's latency-bound work fills the gaps of the bandwidth-bound state launch.

A ring of length 1 holds nothing between steps: every step is a natural flush from an empty ring,
which is one standard decode step with the checkpoint as its state (section 3 of the semantics). There
``launches=None`` runs ``_standard_body`` (``launches=0``): one launch, the standard kernel's bytes,
and no ring access at all, where the replay designs pay a launch 1 and a flush branch for nothing.

Nothing branches on the host: cursors, flushes and padding are device values, so a step can be
captured in a CUDA graph and replayed with new cursors.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import helion
import helion.language as hl
import torch

from replayssm_ref.validation import check_kernel_support, validate_decode_inputs, validate_replayssm_inputs

from .configs import KERNEL_OPTIONS, load_config, split_config, split_flush_from

LOG1P_THRESHOLD = 20.0  # softplus(x) = x above this, as in the reference
L2NORM_EPS = 1e-6


def ring_block(cache_length: int) -> int:
    """The ring length rounded up to a power of two: the cache-length part of a config's shape class."""
    return 1 << (cache_length - 1).bit_length()


def ring_chunk(cache_length: int, most: int = 8) -> int:
    """Ring positions replayed per unrolled chunk: the largest power of two <= ``most`` dividing L."""
    ch = 1
    while ch * 2 <= most and cache_length % (ch * 2) == 0:
        ch *= 2
    return ch


def _l2_scale(x, USE_L2NORM, rows=False):
    """The factor that l2-normalises the fp32 vector ``x`` (1 without l2norm); with ``rows``, each row
    of the ``[R, K]`` tile ``x`` (an ``[R, 1]`` factor)."""
    if USE_L2NORM:
        sq = (x * x).sum(1, keepdim=True) if rows else (x * x).sum(0)
        return 1.0 / torch.sqrt(sq + L2NORM_EPS)  # not rsqrt: Triton's interpreter lacks it
    return 1.0


def _gate(a_t, dt_t, A_log_j, lower_bound, BOUNDED):
    """The per-channel log-decay g (fp32) of any slice of the K channels."""
    x = a_t.to(torch.float32) + dt_t.to(torch.float32)
    A = torch.exp(A_log_j.to(torch.float32))
    if BOUNDED:
        return lower_bound * torch.sigmoid(A * x)
    # where() with two tensors: a Python scalar branch breaks TRITON_INTERPRET codegen.
    return -A * torch.where(x <= LOG1P_THRESHOLD, torch.log1p(torch.exp(torch.minimum(x, x * 0 + LOG1P_THRESHOLD))), x)


def _token_body(q_t, k_t, a_t, dt_t, A_log_j, b_t, scale, lower_bound, USE_L2NORM, BOUNDED, rows=False):
    """Shared by both kernels: normalise q/k, build the gate g and beta (all fp32); with ``rows``, for
    ``[R, K]`` tiles of R heads (``A_log_j`` then ``[R, 1]``).

    Helion inlines this at trace time; it is plain tensor code.
    """
    q = q_t.to(torch.float32)
    k = k_t.to(torch.float32)
    q = q * (_l2_scale(q, USE_L2NORM, rows) * scale)
    k = k * _l2_scale(k, USE_L2NORM, rows)
    g = _gate(a_t, dt_t, A_log_j, lower_bound, BOUNDED)
    beta = torch.sigmoid(b_t.to(torch.float32))
    return q, k, g, beta


def _slot_rows(t: torch.Tensor) -> torch.Tensor:
    """Drop the leading size-1 slot axis of a tile loaded with a slot *vector* index.

    Helion 1.5 generates wrong Triton code for a 0-d tensor used as an index, so slots are indexed
    with the 1-element vector ``ssm_state_indices[tile_b]`` and the axis is summed away (free).
    """
    return t.sum(0)


def _ring_key(k_cache, g_cache, slot, h, j, i, c, tile_b, cols, width):
    """(kappa_i, gamma_i) in fp32 over the K channels ``cols`` (a tile, or ``slice(None)`` with
    ``width=K``), loaded only where ``i < c``: a position past the cursor moves no bytes and reads as
    zero, so stale (even NaN) ring data never enters."""
    live = (hl.zeros([tile_b, width], dtype=torch.int32) + i) < c
    kappa = hl.load(k_cache, [slot, h, i, cols], extra_mask=live).to(torch.float32)
    gamma = hl.load(g_cache, [slot, j, i, cols], extra_mask=live)
    return kappa, gamma


def _ring_delta(d_cache, slot, j, i, c, tile_b, tile_v):
    """d_i in fp32 over ``tile_v``, masked like ``_ring_key``."""
    live = (hl.zeros([tile_b, tile_v], dtype=torch.int32) + i) < c
    return hl.load(d_cache, [slot, j, i, tile_v], extra_mask=live).to(torch.float32)


def _ring_tile_flush(S, newer, d_cache, k_cache, g_cache, slot, h, j, pos, live, later, cols, in_v, tile_fk, alpha):
    """One ``[FW, FK]`` ring tile of the flush's closed form, ring positions ``pos``, newest tile first:
    ``(S + sum_i d_i (W_i alpha kappa_i)^T, newer + sum_i gamma_i)`` over the tile.

    ``W_i alpha kappa_i`` for the whole tile comes from one reverse scan of gamma shifted by one
    position (as in the reference's suffix sums: no subtraction) plus ``newer``, the sum of gamma over
    the newer tiles; the sum over the tile is then one ``[BV, FW] x [FW, FK]`` dot. The ``[1, FW]``
    masks: ``live`` for the ring loads (positions past the cursor load nothing: stale, even NaN,
    entries never enter), ``later`` for gamma shifted by one (i + 1 live and in this tile); ``in_v``
    masks the V channels ``cols`` (``None``: a tile, masked already); ``alpha`` is ``[1, FK]``. The
    loads do not depend on the running sum, so a program has a whole tile in flight."""
    kappa = hl.load(k_cache, [slot, h, pos, tile_fk], extra_mask=live[:, :, None])
    gamma = hl.load(g_cache, [slot, j, pos, tile_fk], extra_mask=live[:, :, None])
    gamma_next = hl.load(g_cache, [slot, j, pos + 1, tile_fk], extra_mask=later[:, :, None])
    d_live = live[:, :, None] if in_v is None else live[:, :, None] & in_v[None, None, :]
    d_t = hl.load(d_cache, [slot, j, pos, cols], extra_mask=d_live)
    suffix = hl.cumsum(gamma_next, 1, reverse=True) + newer.unsqueeze(1)  # [1, FW, FK]
    w = torch.exp(suffix) * kappa.to(torch.float32) * alpha[:, None, :]  # W_i alpha kappa_i
    S = S + torch.bmm(torch.transpose(d_t.to(torch.float32), 1, 2), w)  # [1, BV, FK]: a dot
    return S, newer + gamma.sum(1)


def _handed_tile_flush(S, w_ring, d_cache, row, slot, j, pos, live, cols, in_v, tile_fk):
    """One ``[FW, FK]`` ring tile of the flush's closed form from launch 1's ring weights
    (``flush_weights``): ``S + sum_i d_i (W_i alpha kappa_i)^T`` over the tile, two loads and a
    ``[BV, FW] x [FW, FK]`` dot, with no gate, scan or exp. ``row`` indexes ``w_ring`` (a tile or a
    ``[1]`` vector); the masks are ``_ring_tile_flush``'s."""
    w = hl.load(w_ring, [row, j, pos, tile_fk], extra_mask=live[:, :, None])  # [1, FW, FK]
    d_live = live[:, :, None] if in_v is None else live[:, :, None] & in_v[None, None, :]
    d_t = hl.load(d_cache, [slot, j, pos, cols], extra_mask=d_live)
    return S + torch.bmm(torch.transpose(d_t.to(torch.float32), 1, 2), w)  # [1, BV, FK]: a dot


def _row_setup(ssm_state_indices, write_pos, force_flush, row, tile_b, L, HAS_FORCE):
    """(valid, slot [1], c, flush) of a batch row, shared by the ReplaySSM kernels.

    Padding rows (slot < 0) read slot 0, replay nothing (c = 0) and write nothing. (A helper must
    index with ``hl.load``: plain subscripts with tile offsets only work in the kernel body.)"""
    valid = hl.load(ssm_state_indices, [row]) >= 0
    slot = hl.load(ssm_state_indices, [tile_b])  # [1]: a vector index (see _slot_rows)
    slot = torch.where(slot >= 0, slot, slot * 0)
    cursor = hl.load(write_pos, [row])
    c = torch.where(valid, cursor, cursor * 0)
    flush = c == L - 1
    if HAS_FORCE:
        flush = flush | (hl.load(force_flush, [row]) != 0)
    return valid, slot, c, flush


def _replayssm_fused_body(
    q_view: torch.Tensor,  # [B, H, K]   views into mixed_qkv
    k_view: torch.Tensor,  # [B, H, K]
    v_view: torch.Tensor,  # [B, HV, V]
    a3: torch.Tensor,  # [B, HV, K]
    b: torch.Tensor,  # [B, HV]
    A_log: torch.Tensor,  # [HV]
    dt2: torch.Tensor,  # [HV, K]
    initial_state: torch.Tensor,  # [slots, HV, V, K]
    d_cache: torch.Tensor,  # [slots, HV, L, V]
    k_cache: torch.Tensor,  # [slots, H, L, K]
    g_cache: torch.Tensor,  # [slots, HV, L, K]
    out: torch.Tensor,  # [B, 1, HV, V]
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32
    force_flush: torch.Tensor,  # [B] int32 (write_pos as a stand-in when HAS_FORCE is False)
    scale: float,
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HAS_FORCE: hl.constexpr,
    HPQ: hl.constexpr,  # value heads per q/k head
    LB: hl.constexpr,  # the ring length rounded up to a power of two: one [LB, KC] tile holds it
    CH: hl.constexpr,  # ring positions per unrolled chunk of a flush (divides L)
    PRECISE: hl.constexpr,  # flush by the sequential fold instead of the closed form
    FK: hl.constexpr,  # K channels per step of the flush
) -> torch.Tensor:
    """One ReplaySSM step, one program per (row, value head, V tile)."""
    B = q_view.size(0)
    K = hl.specialize(q_view.size(2))
    HV = v_view.size(1)
    V = hl.specialize(v_view.size(2))
    L = hl.specialize(d_cache.size(2))
    block_v = hl.register_block_size(V)
    block_k = hl.register_block_size(K)
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        row = tile_b.begin
        j = tile_j.begin
        h = j // HPQ
        valid, slot, c, flush = _row_setup(ssm_state_indices, write_pos, force_flush, row, tile_b, L, HAS_FORCE)
        q_full = q_view[row, h, :].to(torch.float32)
        k_full = k_view[row, h, :].to(torch.float32)
        q_scale = _l2_scale(q_full, USE_L2NORM) * scale
        k_scale = _l2_scale(k_full, USE_L2NORM)
        beta = torch.sigmoid(b[row, j].to(torch.float32))
        v = v_view[row, j, tile_v].to(torch.float32)
        ring = hl.arange(LB)  # ring positions; those >= c are masked: stale (even NaN) data never enters
        live = ring < c

        # 1. S_pre x for x = q, k, one K chunk at a time (a pipelined loop: the next chunks' loads are
        #    in flight while this one is reduced). Every K channel of the replay is independent, so a
        #    chunk holds all it needs: the checkpoint's [BV, KC] tile, and the ring's [LB, KC] key side,
        #    whose suffix sums give W_i (e^Gamma for the checkpoint). What crosses chunks is only the
        #    partial mat-vecs and the partial ring scalars (W_i alpha kappa_i) . x.
        sq = hl.zeros([tile_b, tile_v], dtype=torch.float32)
        sk = hl.zeros([tile_b, tile_v], dtype=torch.float32)
        coef_q = hl.zeros([tile_b, LB], dtype=torch.float32)
        coef_k = hl.zeros([tile_b, LB], dtype=torch.float32)
        for tile_k in hl.tile(K, block_size=block_k):
            q = q_view[row, h, tile_k].to(torch.float32) * q_scale
            k = k_view[row, h, tile_k].to(torch.float32) * k_scale
            alpha = torch.exp(_gate(a3[row, j, tile_k], dt2[j, tile_k], A_log[j], lower_bound, BOUNDED))
            S0 = initial_state[slot, j, tile_v, tile_k].to(torch.float32)  # [1, BV, KC]
            kappa = hl.load(k_cache, [slot, h, ring, tile_k], extra_mask=live[None, :, None]).to(torch.float32)
            gamma = hl.load(g_cache, [slot, j, ring, tile_k], extra_mask=live[None, :, None])  # [1, LB, KC]
            newer = hl.cumsum(gamma, 1, reverse=True) - gamma  # sum over the entries after i
            w_alpha = torch.exp(newer) * kappa * alpha[None, None, :]  # W_i alpha kappa_i
            coef_q = coef_q + (w_alpha * q[None, None, :]).sum(2)
            coef_k = coef_k + (w_alpha * k[None, None, :]).sum(2)
            decay = torch.exp(gamma.sum(1)) * alpha[None, :]  # e^Gamma alpha, [1, KC]
            sq = sq + (S0 * (decay * q[None, :])[:, None, :]).sum(2)
            sk = sk + (S0 * (decay * k[None, :])[:, None, :]).sum(2)
        d = hl.load(d_cache, [slot, j, ring, tile_v], extra_mask=live[None, :, None]).to(torch.float32)
        sq = (sq + (d * coef_q[:, :, None]).sum(1)).sum(0)  # [BV]
        sk = (sk + (d * coef_k[:, :, None]).sum(1)).sum(0)

        # 2. The current token.
        u = beta * (v - sk)
        o = sq + u * ((k_full * q_full).sum(0) * (k_scale * q_scale))
        out[row, 0, j, tile_v] = torch.where(valid, o, hl.zeros([tile_v], dtype=torch.float32)).to(out.dtype)

        # 3. Flush rows rebuild the post-token state and write the checkpoint, FK channels of K at a
        #    time (the checkpoint tile re-read, from L2), so this rarely taken branch does not set every
        #    program's register budget.
        if valid & flush:
            for tile_f in hl.tile(K, block_size=FK):
                k_c = k_view[row, h, tile_f].to(torch.float32) * k_scale
                alpha_c = torch.exp(_gate(a3[row, j, tile_f], dt2[j, tile_f], A_log[j], lower_bound, BOUNDED))
                if PRECISE:  # oldest to newest: S <- S e^gamma_i + d_i kappa_i^T, the recurrence's order
                    S = initial_state[slot, j, tile_v, tile_f].to(torch.float32)  # [1, BV, FK]
                    for tile_p in hl.tile(0, (c + CH - 1) // CH, block_size=1):
                        for t in hl.static_range(CH):
                            i_f = tile_p.begin * CH + t
                            kappa_f, gamma_f = _ring_key(k_cache, g_cache, slot, h, j, i_f, c, tile_b, tile_f, tile_f)
                            d_f = _ring_delta(d_cache, slot, j, i_f, c, tile_b, tile_v)
                            S = S * torch.exp(gamma_f)[:, None, :] + d_f[:, :, None] * kappa_f[:, None, :]
                    S = S * alpha_c[None, None, :]
                else:  # closed form, newest to oldest: sum_i d_i (W_i alpha kappa_i)^T + S0 e^Gamma alpha
                    S = hl.zeros([tile_b, tile_v, tile_f], dtype=torch.float32)
                    w_f = hl.zeros([tile_b, tile_f], dtype=torch.float32) + alpha_c[None, :]  # W_i alpha
                    for tile_w in hl.tile((L - c) // CH, L // CH, block_size=1):
                        for t in hl.static_range(CH):
                            i_f = L - 1 - tile_w.begin * CH - t
                            kappa_f, gamma_f = _ring_key(k_cache, g_cache, slot, h, j, i_f, c, tile_b, tile_f, tile_f)
                            d_f = _ring_delta(d_cache, slot, j, i_f, c, tile_b, tile_v)
                            S = S + d_f[:, :, None] * (w_f * kappa_f)[:, None, :]
                            w_f = w_f * torch.exp(gamma_f)
                    S = S + initial_state[slot, j, tile_v, tile_f].to(torch.float32) * w_f[:, None, :]
                S = S + u[None, :, None] * k_c[None, None, :]
                initial_state[slot, j, tile_v, tile_f] = S.to(initial_state.dtype)

        # 4. Other rows append (u, k, g) at the cursor; g once per value head, k once per q/k head.
        if valid & ~flush:
            for tile_c in hl.tile(c, c + 1, block_size=1):  # the one position c, as a tile
                d_cache[slot, j, tile_c, tile_v] = u[None, None, :].to(d_cache.dtype)
                if tile_v.begin == 0:
                    g = _gate(a3[row, j, :], dt2[j, :], A_log[j], lower_bound, BOUNDED)
                    g_cache[slot, j, tile_c, :] = g[None, None, :]
                    if j % HPQ == 0:
                        k_cache[slot, h, tile_c, :] = (k_full * k_scale)[None, None, :].to(k_cache.dtype)
    return out


def _ring_weights_body(
    q_view: torch.Tensor,  # [B, H, K]
    k_view: torch.Tensor,  # [B, H, K]
    a3: torch.Tensor,  # [B, HV, K]
    b: torch.Tensor,  # [B, HV]
    A_log: torch.Tensor,  # [HV]
    dt2: torch.Tensor,  # [HV, K]
    k_cache: torch.Tensor,  # [slots, H, L, K]
    g_cache: torch.Tensor,  # [slots, HV, L, K]
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32
    force_flush: torch.Tensor,  # [B] int32
    coef: torch.Tensor,  # [B, HV, 2, L] fp32, written: (W_i alpha kappa_i) . q and . k
    xs: torch.Tensor,  # [B, HV, 2, K] fp32, written: e^Gamma alpha q and e^Gamma alpha k
    qk: torch.Tensor,  # [B, HV] fp32, written: q . k (the current token's own term)
    decay: torch.Tensor,  # [B, HV, K] fp32, written: e^Gamma alpha (for the flush rows' rebuild)
    w_ring: torch.Tensor,  # [B, HV, L, K] fp32, written on flush rows (HAND_W): W_i alpha kappa_i, i < c
    scale: float,
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HAS_FORCE: hl.constexpr,
    HPQ: hl.constexpr,
    CH: hl.constexpr,  # ring positions per unrolled chunk (divides L)
    HAND_W: hl.constexpr,  # hand the flush-rows launch its ring weights (the flush_weights option)
    RH: hl.constexpr,  # value heads per program (the prep_heads option; divides HV)
) -> torch.Tensor:
    """Launch 1 of a two- or three-launch ReplaySSM step, one program per (row, ``RH`` value heads):
    everything on the K side.

    The state enters a step only through ``S_pre x = S0 (e^Gamma alpha x) + sum_i d_i ((W_i alpha
    kappa_i) . x)`` for x = q, k (normalised and scaled), so the K-side ring (``kappa``, ``gamma``)
    collapses to the two K-vectors ``e^Gamma alpha x`` and 2c scalars per (row, head). Computing them
    here, once, leaves the state kernel (launch 2) a pair of mat-vecs with ready vectors: no ring work
    repeated per V tile, no norms, no gate.

    Tiles are ``[1, RH, K]`` (row, heads, channels): every reduction runs along K, within one head.
    With ``RH`` heads and as many warps a program keeps one warp per head, and a streaming
    multiprocessor, which holds at most 32 programs, more warps in flight than with one-warp programs."""
    B = q_view.size(0)
    K = hl.specialize(q_view.size(2))
    HV = a3.size(1)
    L = hl.specialize(g_cache.size(2))
    for tile_b, tile_j in hl.tile([B, HV], block_size=[1, RH]):
        row = tile_b.begin
        h = tile_j.index // HPQ  # [RH]: each value head's q/k head
        valid, slot, c, flush = _row_setup(ssm_state_indices, write_pos, force_flush, row, tile_b, L, HAS_FORCE)
        q, k, g, _ = _token_body(  # [RH, K] each
            q_view[row, h, :], k_view[row, h, :], a3[row, tile_j, :], dt2[tile_j, :], A_log[tile_j][:, None],
            b[row, tile_j], scale, lower_bound, USE_L2NORM, BOUNDED, rows=True,
        )  # fmt: skip
        # Newest entry first, one entry at a time (CH per unrolled chunk, so their loads issue together):
        # the suffix sums W_i = exp(sum_{i<m<c} gamma_m) accumulate forward, with no cancellation and no
        # scan along the ring axis. Chunks start at the one holding c - 1; positions >= c load nothing
        # (stale, even NaN, entries never enter). (Reading the ring as [16, K] tiles with a reverse scan
        # instead ran this launch at half the speed on the H200: run 23 in results/bench/NOTES.md.)
        # Each position's coef stores come before the next position's loads, and neither Triton nor
        # ptxas moves a load above a store it cannot prove apart, so unpipelined (prep_stages 0) a
        # program pays one memory round trip per live position (`inspect_codegen --memory-order`). prep_stages
        # pipelines this loop: a chunk's loads then go out together, as async copies, ahead of its math.
        alpha = torch.exp(g)
        newer = hl.zeros([tile_b, tile_j, K], dtype=torch.float32)  # sum of gamma over the entries seen
        for tile_f in hl.tile((L - c) // CH, L // CH, block_size=1):
            for t in hl.static_range(CH):
                i = L - 1 - tile_f.begin * CH - t
                live = (hl.zeros([tile_b, tile_j, K], dtype=torch.int32) + i) < c
                kappa = hl.load(k_cache, [slot, h, i, hl.arange(K)], extra_mask=live).to(torch.float32)
                gamma = hl.load(g_cache, [slot, tile_j, i, hl.arange(K)], extra_mask=live)
                m = torch.exp(newer) * kappa * alpha[None, :, :]  # W_i alpha kappa_i, [1, RH, K]
                hl.store(coef, [tile_b, tile_j, 0, i], (m * q[None, :, :]).sum(2))
                hl.store(coef, [tile_b, tile_j, 1, i], (m * k[None, :, :]).sum(2))
                if HAND_W:  # the flush's rank-1 weights, for live positions of flush rows only
                    # (a bound of 0 on other rows: a scalar flag in the mask breaks TRITON_INTERPRET)
                    hand = (hl.zeros([tile_b, tile_j, K], dtype=torch.int32) + i) < torch.where(flush, c, c * 0)
                    hl.store(w_ring, [tile_b, tile_j, i, hl.arange(K)], m, extra_mask=hand)
                newer = newer + gamma
        decay_alpha = torch.exp(newer + g[None, :, :])  # e^Gamma alpha: newer = Gamma now
        decay[tile_b, tile_j, :] = decay_alpha
        xs[tile_b, tile_j, 0, :] = decay_alpha * q[None, :, :]
        xs[tile_b, tile_j, 1, :] = decay_alpha * k[None, :, :]
        qk[tile_b, tile_j] = (q * k).sum(1)[None, :]
        # Non-flush rows append k and g at the cursor (d comes from launch 2); k once per q/k head, by
        # the first value head of its group.
        if valid & ~flush:
            for tile_c in hl.tile(c, c + 1, block_size=1):
                g_cache[slot, tile_j, tile_c, :] = g[None, :, None, :]
                first = (hl.zeros([tile_b, tile_j, K], dtype=torch.int32) + tile_j.index[None, :, None]) % HPQ == 0
                hl.store(
                    k_cache, [slot, h, tile_c, hl.arange(K)], k[None, :, None, :].to(k_cache.dtype),
                    extra_mask=first[:, :, None, :],
                )  # fmt: skip
    return coef


def _checkpoint_chunk(S0, xs, tile_b, j, tile_k, acc_q, acc_k):
    """One ``[BV, KC]`` chunk of the checkpoint's two mat-vecs: ``acc_x += S0 (e^Gamma alpha x)``."""
    S0 = S0.to(torch.float32)
    acc_q = acc_q + (S0 * hl.load(xs, [tile_b, j, 0, tile_k]).unsqueeze(1)).sum(2)  # x = e^Gamma alpha q
    acc_k = acc_k + (S0 * hl.load(xs, [tile_b, j, 1, tile_k]).unsqueeze(1)).sum(2)
    return acc_q, acc_k


def _replayssm_state_body(
    q_view: torch.Tensor,  # [B, H, K]   views into mixed_qkv
    k_view: torch.Tensor,  # [B, H, K]
    v_view: torch.Tensor,  # [B, HV, V]
    a3: torch.Tensor,  # [B, HV, K]
    b: torch.Tensor,  # [B, HV]
    A_log: torch.Tensor,  # [HV]
    dt2: torch.Tensor,  # [HV, K]
    initial_state: torch.Tensor,  # [slots, HV, V, K], read
    # initial_state again, written by the flush: a second argument, so that Helion may pipeline the
    # flush's loop over K steps (flush_k_stages; it keeps a loop that reads and writes one argument
    # unpipelined, for triton#8259); a step writes only the tile it read
    state_out: torch.Tensor,
    d_cache: torch.Tensor,  # [slots, HV, L, V]
    k_cache: torch.Tensor,  # [slots, H, L, K]
    g_cache: torch.Tensor,  # [slots, HV, L, K]
    coef: torch.Tensor,  # [B, HV, 2, L] from launch 1
    xs: torch.Tensor,  # [B, HV, 2, K] from launch 1: e^Gamma alpha q, e^Gamma alpha k
    qk: torch.Tensor,  # [B, HV] from launch 1: q . k
    decay: torch.Tensor,  # [B, HV, K] from launch 1: e^Gamma alpha
    w_ring: torch.Tensor,  # [B, HV, L, K] from launch 1 (HAND_W): W_i alpha kappa_i of flush rows
    u_buf: torch.Tensor,  # [B, HV, V] fp32: flush rows' u, from the state launch to the flush launch
    out: torch.Tensor,  # [B, 1, HV, V]
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32
    force_flush: torch.Tensor,  # [B] int32 (write_pos as a stand-in when HAS_FORCE is False)
    scale: float,
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HAS_FORCE: hl.constexpr,
    HPQ: hl.constexpr,  # value heads per q/k head
    RB: hl.constexpr,  # ring positions per device-loop iteration (per tile, with RING_ONCE)
    RING_ONCE: hl.constexpr,  # the ring fits one RB tile: load it beside the checkpoint, not in a loop
    CH: hl.constexpr,  # ring positions per unrolled chunk of a flush (divides L)
    PRECISE: hl.constexpr,  # flush by the sequential fold instead of the closed form
    FK: hl.constexpr,  # K channels per step of the flush
    TILES: hl.constexpr,  # closed form by [FW, FK] ring tiles: a reverse scan, then a dot with d
    FW: hl.constexpr,  # ring positions per tile with TILES (16 or more: a dot's smallest side)
    STATE: hl.constexpr,  # steps 1, 2 and 4: the output and the d append
    FLUSH: hl.constexpr,  # step 3: flush rows' checkpoint write
    SKIP_FLUSH: hl.constexpr,  # with STATE only: flush rows are wholly the flush-rows launch's (output too)
    HAND_W: hl.constexpr,  # with TILES: a ring tile is launch 1's W_i alpha kappa_i and a dot (flush_weights)
    KEEP: hl.constexpr,  # with STATE and FLUSH: L2 eviction hints that keep flush rows' tiles (flush_keep)
) -> torch.Tensor:
    """The state side, one program per (row, value head, V tile): launch 2 of a two-launch step
    (``STATE`` and ``FLUSH``), or launch 2 (``STATE``) and 3 (``FLUSH``) of a three-launch step, where
    the flush rows' checkpoint write runs as its own launch so that it does not set the register
    budget of the state launch; ``u_buf`` hands those rows' ``u`` from one to the other."""
    B = q_view.size(0)
    K = hl.specialize(q_view.size(2))
    HV = v_view.size(1)
    V = hl.specialize(v_view.size(2))
    L = hl.specialize(d_cache.size(2))
    block_v = hl.register_block_size(V)
    block_k = hl.register_block_size(K)  # the checkpoint's K chunk in the state launch
    NT = (L + FW - 1) // FW  # ring tiles of a TILES flush
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        row = tile_b.begin
        j = tile_j.begin
        h = j // HPQ
        valid, slot, c, flush = _row_setup(ssm_state_indices, write_pos, force_flush, row, tile_b, L, HAS_FORCE)
        # With SKIP_FLUSH a flush row is left wholly to the flush-rows launch (its output too), which
        # then touches no data this launch does and can run beside it (_flush_rows_body's OWN).
        mine = ~(valid & flush) if SKIP_FLUSH else True
        if STATE:
            if mine:
                beta = torch.sigmoid(b[row, j].to(torch.float32))
                v = v_view[row, j, tile_v].to(torch.float32)

                # 1. S_pre x for x = q, k: the ring's d tile times 2c scalars, and the checkpoint's two
                #    mat-vecs, one [BV, KC] chunk of K at a time (a pipelined loop: the next chunks' loads are
                #    in flight while one is reduced, and a chunk, not the whole [BV, K] tile, sets the
                #    registers a program holds). A ring that fits one tile (RING_ONCE) is loaded before the
                #    K loop and reduced after it, so its loads and the checkpoint's are in flight together;
                #    a longer one is walked first, RB positions at a time.
                acc_q = hl.zeros([tile_b, tile_v], dtype=torch.float32)
                acc_k = hl.zeros([tile_b, tile_v], dtype=torch.float32)
                if RING_ONCE:
                    ring = hl.arange(RB)
                    live = ring < c  # positions >= c load nothing: stale (even NaN) entries never enter
                    d_all = hl.load(d_cache, [slot, j, ring, tile_v], extra_mask=live[None, :, None])  # [1, RB, BV]
                    coef_q = hl.load(coef, [tile_b, j, 0, ring], extra_mask=live[None, :])  # [1, RB]
                    coef_k = hl.load(coef, [tile_b, j, 1, ring], extra_mask=live[None, :])
                else:
                    for tile_i in hl.tile(0, c, block_size=RB):  # ends at c: stale entries are never read
                        d = d_cache[slot, j, tile_i, tile_v].to(torch.float32)  # [1, RB, BV]
                        acc_q = acc_q + (d * coef[tile_b, j, 0, tile_i][:, :, None]).sum(1)
                        acc_k = acc_k + (d * coef[tile_b, j, 1, tile_i][:, :, None]).sum(1)
                if KEEP:
                    # A flush row reads its tile again in step 3: its chunks go through L2 as evict_last,
                    # every other row's (read once) as evict_first, so the re-read finds them there. Two
                    # copies of the loop, exactly one of which runs: K_keep is K or 0.
                    K_keep = (valid & flush).to(torch.int32) * K
                    for tile_k in hl.tile(0, K_keep, block_size=block_k):
                        S0 = hl.load(initial_state, [slot, j, tile_v, tile_k], eviction_policy="evict_last")
                        acc_q, acc_k = _checkpoint_chunk(S0, xs, tile_b, j, tile_k, acc_q, acc_k)
                    for tile_k in hl.tile(K_keep, K, block_size=block_k):
                        S0 = hl.load(initial_state, [slot, j, tile_v, tile_k], eviction_policy="evict_first")
                        acc_q, acc_k = _checkpoint_chunk(S0, xs, tile_b, j, tile_k, acc_q, acc_k)
                else:
                    for tile_k in hl.tile(K, block_size=block_k):
                        S0 = initial_state[slot, j, tile_v, tile_k]  # [1, BV, KC]
                        acc_q, acc_k = _checkpoint_chunk(S0, xs, tile_b, j, tile_k, acc_q, acc_k)
                if RING_ONCE:
                    acc_q = acc_q + (d_all.to(torch.float32) * coef_q[:, :, None]).sum(1)
                    acc_k = acc_k + (d_all.to(torch.float32) * coef_k[:, :, None]).sum(1)
                sq = acc_q.sum(0)  # [BV]
                sk = acc_k.sum(0)

                # 2. The current token.
                u = beta * (v - sk)
                o = sq + u * qk[row, j]
                out[row, 0, j, tile_v] = torch.where(valid, o, hl.zeros([tile_v], dtype=torch.float32)).to(out.dtype)
                if not FLUSH:  # a split step's state launch
                    if not SKIP_FLUSH:
                        if valid & flush:
                            u_buf[row, j, tile_v] = u
                    # 4. Other rows append d = u at the cursor (launch 1 appended k and g).
                    if valid & ~flush:
                        for tile_c in hl.tile(c, c + 1, block_size=1):  # the one position c, as a tile
                            d_cache[slot, j, tile_c, tile_v] = u[None, None, :].to(d_cache.dtype)
        else:
            u = u_buf[row, j, tile_v]

        # 3. Flush rows rebuild the post-token state and write the checkpoint, FK channels of K at a
        #    time: every channel of the fold is independent, and a [BV, FK] tile (the checkpoint re-read,
        #    from L2) keeps this rarely taken branch from setting the register budget of every program.
        if FLUSH:
            if valid & flush:
                k_scale = _l2_scale(k_view[row, h, :].to(torch.float32), USE_L2NORM)
                for tile_fk in hl.tile(K, block_size=FK):
                    S = initial_state[slot, j, tile_v, tile_fk].to(torch.float32)  # [1, BV, FK]
                    k_c = k_view[row, h, tile_fk].to(torch.float32) * k_scale
                    alpha_c = torch.exp(_gate(a3[row, j, tile_fk], dt2[j, tile_fk], A_log[j], lower_bound, BOUNDED))
                    if PRECISE:  # oldest to newest: S <- S e^gamma_i + d_i kappa_i^T, the recurrence's order
                        for tile_p in hl.tile(0, (c + CH - 1) // CH, block_size=1):
                            for t in hl.static_range(CH):
                                i_f = tile_p.begin * CH + t
                                kappa_f, gamma_f = _ring_key(
                                    k_cache, g_cache, slot, h, j, i_f, c, tile_b, tile_fk, tile_fk
                                )
                                d_f = _ring_delta(d_cache, slot, j, i_f, c, tile_b, tile_v)
                                S = S * torch.exp(gamma_f)[:, None, :] + d_f[:, :, None] * kappa_f[:, None, :]
                        S = S * alpha_c[None, None, :]
                    elif HAND_W:  # as TILES, with launch 1's weights: per ring tile two loads and a dot
                        S = S * decay[tile_b, j, tile_fk][:, None, :]
                        for tile_w in hl.tile(0, NT, block_size=1):  # positions >= c load nothing
                            w_pos = tile_w.begin * FW + hl.arange(FW)
                            w_live = w_pos[None, :] < c  # [1, FW]
                            S = _handed_tile_flush(
                                S, w_ring, d_cache, tile_b, slot, j, w_pos, w_live, tile_v, None, tile_fk
                            )
                    elif TILES:  # the closed form below, a [FW, FK] tile of the ring at a time (_ring_tile_flush)
                        S = S * decay[tile_b, j, tile_fk][:, None, :]
                        newer = hl.zeros([tile_b, tile_fk], dtype=torch.float32)  # sum of gamma over newer tiles
                        # (names of their own: `ring` and `live` above are the RING_ONCE tile's, and a
                        # loop may not rebind a name to another shape)
                        for tile_t in hl.tile((NT * FW - c) // FW, NT, block_size=1):  # newest tile first
                            start = (NT - 1 - tile_t.begin) * FW
                            pos = start + hl.arange(FW)
                            pos_live = pos[None, :] < c  # [1, FW]
                            pos_later = (pos[None, :] + 1 < c) & (pos[None, :] + 1 < start + FW)
                            S, newer = _ring_tile_flush(
                                S, newer, d_cache, k_cache, g_cache, slot, h, j, pos, pos_live, pos_later,
                                tile_v, None, tile_fk, alpha_c[None, :],
                            )  # fmt: skip
                    else:  # closed form, newest to oldest: S0 e^Gamma alpha + sum_i d_i (W_i alpha kappa_i)^T
                        # (S0 scaled first: keeping it apart until the end took the two-launch state kernel from
                        # 128 to 181 registers, run 24)
                        S = S * decay[tile_b, j, tile_fk][:, None, :]
                        w_alpha = hl.zeros([tile_b, tile_fk], dtype=torch.float32) + alpha_c[None, :]  # W_i alpha
                        for tile_f in hl.tile((L - c) // CH, L // CH, block_size=1):
                            for t in hl.static_range(CH):
                                i_f = L - 1 - tile_f.begin * CH - t
                                kappa_f, gamma_f = _ring_key(
                                    k_cache, g_cache, slot, h, j, i_f, c, tile_b, tile_fk, tile_fk
                                )
                                d_f = _ring_delta(d_cache, slot, j, i_f, c, tile_b, tile_v)
                                S = S + d_f[:, :, None] * (w_alpha * kappa_f)[:, None, :]
                                w_alpha = w_alpha * torch.exp(gamma_f)
                    S = S + u[None, :, None] * k_c[None, None, :]
                    state_out[slot, j, tile_v, tile_fk] = S.to(state_out.dtype)

        # 4. (two-launch step) Other rows append d = u at the cursor (launch 1 appended k and g).
        if STATE and FLUSH:
            if valid & ~flush:
                for tile_c in hl.tile(c, c + 1, block_size=1):  # the one position c, as a tile
                    d_cache[slot, j, tile_c, tile_v] = u[None, None, :].to(d_cache.dtype)
    return out


def _flush_rows_body(
    k_view: torch.Tensor,  # [B, H, K]
    a3: torch.Tensor,  # [B, HV, K]
    A_log: torch.Tensor,  # [HV]
    dt2: torch.Tensor,  # [HV, K]
    initial_state: torch.Tensor,  # [slots, HV, V, K], read
    # initial_state again, written: a second argument, so that Helion's alias check (which keeps any loop
    # that reads and writes one argument from being pipelined, for triton#8259) lets the item loop be
    # pipelined (flush_stages): an item writes only the tile it read, and no other item reads it
    state_out: torch.Tensor,
    d_cache: torch.Tensor,  # [slots, HV, L, V]
    k_cache: torch.Tensor,  # [slots, H, L, K]
    g_cache: torch.Tensor,  # [slots, HV, L, K]
    decay: torch.Tensor,  # [B, HV, K] from launch 1: e^Gamma alpha
    w_ring: torch.Tensor,  # [B, HV, L, K] from launch 1 (HAND_W): W_i alpha kappa_i of flush rows
    u_buf: torch.Tensor,  # [B, HV, V] fp32 from the state launch: the flush rows' u (a stand-in with OWN)
    v_view: torch.Tensor,  # [B, HV, V]                      (OWN only, with the five below)
    b: torch.Tensor,  # [B, HV]
    coef: torch.Tensor,  # [B, HV, 2, L] from launch 1
    xs: torch.Tensor,  # [B, HV, 2, K] from launch 1: e^Gamma alpha q, e^Gamma alpha k
    qk: torch.Tensor,  # [B, HV] from launch 1: q . k
    out: torch.Tensor,  # [B, 1, HV, V]
    programs: torch.Tensor,  # [P]: only its length is read, the number of programs
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32
    force_flush: torch.Tensor,  # [B] int32 (write_pos as a stand-in when HAS_FORCE is False)
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HAS_FORCE: hl.constexpr,
    HPQ: hl.constexpr,
    FK: hl.constexpr,  # K channels per step
    FW: hl.constexpr,  # ring positions per tile (16 or more: a dot's smallest side)
    BV: hl.constexpr,  # V channels per work item
    BB: hl.constexpr,  # the batch rounded up to a power of two
    LB: hl.constexpr,  # the ring rounded up to a power of two (OWN: the d tile of S_pre x)
    OWN: hl.constexpr,  # the flush rows' u and output too (the state launch skipped them: SKIP_FLUSH)
    HAND_W: hl.constexpr,  # read W_i alpha kappa_i from launch 1 instead of rebuilding it per item
    ONE: hl.constexpr,  # OWN, HAND_W, FK == K, one ring tile: one checkpoint load, straight-line items
) -> torch.Tensor:
    """Launch 3 of a three-launch step over the flush rows only: ``P`` programs share the work items
    (flush row, value head, V tile) of this step, item ``t`` going to program ``t % P``.

    The rows that flush are device values, so the grid cannot be sized by them (a step stays one CUDA
    graph); a grid over every row spends most of its programs on rows that then do nothing. Here each
    program ranks the flushing rows itself (a cumsum over the batch's flags: ``BB`` integers), and
    the r-th flushing row is the number of rows whose running count is at most r. An item is the
    closed form by ring tiles of ``_replayssm_state_body``'s ``TILES`` flush.

    With ``OWN`` an item first does what the state launch does for a row (``S_pre q``, ``S_pre k``,
    ``u`` and the output), so this launch shares no data with the state launch (which skips flush
    rows) and the two can run at the same time on two streams (``Launch.beside``). With ``HAND_W``
    launch 1 has stored the weights ``W_i alpha kappa_i`` of flush rows (it computes them anyway for
    its ring scalars), so a ring tile is two loads and a dot: no gate, no reverse scan, no exp. With
    ``ONE`` (``OWN`` and ``HAND_W``, ``flush_block_k`` = K and a ring of one tile) an item loads its
    ``[BV, K]`` checkpoint tile once and keeps it in registers for both passes, instead of reading it
    again (from L2) for the flush, and its ring tile is OWN's ``d`` tile: an item is then straight-line
    code, so the loop over a program's items is the innermost loop and Triton can pipeline it
    (``flush_stages``: the next items' loads in flight while one is computed)."""
    B = write_pos.size(0)
    K = hl.specialize(k_view.size(2))
    HV = a3.size(1)
    V = hl.specialize(u_buf.size(2))
    L = hl.specialize(d_cache.size(2))
    P = programs.size(0)
    NV = (V + BV - 1) // BV
    NT = (L + FW - 1) // FW
    for tile_p in hl.tile(P, block_size=1):
        rows = hl.arange(BB)
        in_batch = rows < B
        valid = in_batch & (hl.load(ssm_state_indices, [rows], extra_mask=in_batch) >= 0)
        flush = valid & (hl.load(write_pos, [rows], extra_mask=in_batch) == L - 1)
        if HAS_FORCE:
            flush = flush | (valid & (hl.load(force_flush, [rows], extra_mask=in_batch) != 0))
        count = hl.cumsum(flush.to(torch.int32), 0)  # [BB]: flushing rows up to and including each row
        items = flush.to(torch.int32).sum(0) * (HV * NV)
        for tile_t in hl.tile(0, (items - tile_p.begin + P - 1) // P, block_size=1):
            t = tile_p.begin + tile_t.begin * P
            r = t // (HV * NV)  # rank of the item's row among the flushing rows
            j = (t // NV) % HV
            h = j // HPQ
            row = (count[None, :] <= r).to(torch.int32).sum(1).to(torch.int32)  # [1]: a vector index (_slot_rows)
            slot = hl.load(ssm_state_indices, [row])
            c = hl.load(write_pos, [row])  # [1]
            cols = (t % NV) * BV + hl.arange(BV)
            in_v = cols < V
            if OWN:  # as the state launch's steps 1 and 2 (read from the checkpoint before it is rewritten)
                beta = torch.sigmoid(hl.load(b, [row, j]).to(torch.float32))  # [1]
                v = hl.load(v_view, [row, j, cols], extra_mask=in_v[None, :]).to(torch.float32)  # [1, BV]
                pos = hl.arange(LB)
                pos_live = pos[None, :] < c[:, None]  # [1, LB]: positions >= c load nothing
                d_mask = pos_live[:, :, None] & in_v[None, None, :]
                d_all = hl.load(d_cache, [slot, j, pos, cols], extra_mask=d_mask).to(torch.float32)  # [1, LB, BV]
                coef_q = hl.load(coef, [row, j, 0, pos], extra_mask=pos_live)  # [1, LB]
                coef_k = hl.load(coef, [row, j, 1, pos], extra_mask=pos_live)
                acc_q = (d_all * coef_q[:, :, None]).sum(1)  # [1, BV]
                acc_k = (d_all * coef_k[:, :, None]).sum(1)
                if ONE:  # the whole [BV, K] tile at once, kept for the flush below
                    all_k = hl.arange(K)
                    S_kept = hl.load(initial_state, [slot, j, cols, all_k], extra_mask=in_v[None, :, None])
                    S_kept = S_kept.to(torch.float32)
                    acc_q = acc_q + (S_kept * xs[row, j, 0, all_k][:, None, :]).sum(2)
                    acc_k = acc_k + (S_kept * xs[row, j, 1, all_k][:, None, :]).sum(2)
                else:
                    for tile_k in hl.tile(K, block_size=FK):
                        S0 = hl.load(initial_state, [slot, j, cols, tile_k], extra_mask=in_v[None, :, None])
                        acc_q = acc_q + (S0.to(torch.float32) * xs[row, j, 0, tile_k][:, None, :]).sum(2)
                        acc_k = acc_k + (S0.to(torch.float32) * xs[row, j, 1, tile_k][:, None, :]).sum(2)
                u = beta[:, None] * (v - acc_k)
                o = acc_q + u * qk[row, j][:, None]
                hl.store(out, [row, 0, j, cols], o.to(out.dtype), extra_mask=in_v[None, :])
            else:
                u = hl.load(u_buf, [row, j, cols], extra_mask=in_v[None, :])  # [1, BV]
            k_full = hl.load(k_view, [row, h, hl.arange(K)]).to(torch.float32)  # [1, K]
            k_scale = _l2_scale(k_full.sum(0), USE_L2NORM)
            if ONE:  # straight-line (no inner loop, so the item loop can be pipelined: flush_stages)
                # the kept tile, and the ring's one tile: OWN's d_all (positions >= c are zeros) with
                # launch 1's weights
                w = hl.load(w_ring, [row, j, pos, all_k], extra_mask=pos_live[:, :, None])  # [1, LB, K]
                S = S_kept * decay[row, j, all_k][:, None, :] + torch.bmm(torch.transpose(d_all, 1, 2), w)
                S = S + u[:, :, None] * (k_full * k_scale)[:, None, :]
                hl.store(state_out, [slot, j, cols, all_k], S.to(initial_state.dtype), extra_mask=in_v[None, :, None])
            else:
                for tile_fk in hl.tile(K, block_size=FK):
                    S = hl.load(initial_state, [slot, j, cols, tile_fk], extra_mask=in_v[None, :, None])
                    S = S.to(torch.float32)
                    S = S * decay[row, j, tile_fk][:, None, :]  # [1, BV, FK]
                    if HAND_W:
                        for tile_w in hl.tile(0, NT, block_size=1):  # positions >= c load nothing
                            # (names of their own: OWN's pos / pos_live / d_mask span the whole ring)
                            w_pos = tile_w.begin * FW + hl.arange(FW)
                            w_live = w_pos[None, :] < c[:, None]  # [1, FW]
                            S = _handed_tile_flush(S, w_ring, d_cache, row, slot, j, w_pos, w_live, cols, in_v, tile_fk)
                    else:
                        alpha_c = torch.exp(_gate(a3[row, j, tile_fk], dt2[j, tile_fk], A_log[j], lower_bound, BOUNDED))
                        newer = hl.zeros([1, tile_fk], dtype=torch.float32)  # sum of gamma over the newer tiles
                        for tile_w in hl.tile(0, NT, block_size=1):  # newest tile first (_ring_tile_flush)
                            start = (NT - 1 - tile_w.begin) * FW
                            ring = start + hl.arange(FW)
                            live = ring[None, :] < c[:, None]  # [1, FW]
                            later = (ring[None, :] + 1 < c[:, None]) & (ring[None, :] + 1 < start + FW)
                            S, newer = _ring_tile_flush(
                                S, newer, d_cache, k_cache, g_cache, slot, h, j, ring, live, later, cols, in_v, tile_fk,
                                alpha_c,
                            )  # fmt: skip
                    k_c = k_view[row, h, tile_fk].to(torch.float32) * k_scale  # [1, FK]
                    S = S + u[:, :, None] * k_c[:, None, :]
                    out_mask = in_v[None, :, None]
                    hl.store(state_out, [slot, j, cols, tile_fk], S.to(initial_state.dtype), extra_mask=out_mask)
    return u_buf


def _standard_body(
    q_view: torch.Tensor,
    k_view: torch.Tensor,
    v_view: torch.Tensor,
    a3: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt2: torch.Tensor,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    scale: float,
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HPQ: hl.constexpr,
) -> torch.Tensor:
    B = q_view.size(0)
    hl.specialize(q_view.size(2))  # K
    HV = v_view.size(1)
    V = hl.specialize(v_view.size(2))
    block_v = hl.register_block_size(V)
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        row = tile_b.begin
        j = tile_j.begin
        h = j // HPQ
        valid = ssm_state_indices[row] >= 0
        slot = ssm_state_indices[tile_b]
        slot = torch.where(slot >= 0, slot, slot * 0)
        q, k, g, beta = _token_body(
            q_view[row, h, :], k_view[row, h, :], a3[row, j, :], dt2[j, :], A_log[j], b[row, j],
            scale, lower_bound, USE_L2NORM, BOUNDED,
        )  # fmt: skip
        v = v_view[row, j, tile_v].to(torch.float32)
        S = _slot_rows(initial_state[slot, j, tile_v, :]).to(torch.float32) * torch.exp(g)[None, :]
        u = beta * (v - (S * k[None, :]).sum(1))
        S = S + u[:, None] * k[None, :]
        o = (S * q[None, :]).sum(1)
        out[row, 0, j, tile_v] = torch.where(valid, o, hl.zeros([tile_v], dtype=torch.float32)).to(out.dtype)
        if valid:
            initial_state[slot, j, tile_v, :] = S[None, :, :].to(initial_state.dtype)
    return out


# Kernel objects are built per (precision, config) on first use and cached; nothing autotunes unless
# a config is missing *and* the caller asked for autotuning (replayssm_kernels.tune).
_KERNELS: dict[tuple, object] = {}


FLUSH_DOTS = ("ieee", "tf32x3", "tf32")


def _kernel(body, config: helion.Config | None, dot_precision: str = "ieee"):
    """The Helion kernel for ``body`` with a fixed config; ``None`` (tuning only) lets Helion autotune.

    ``dot_precision`` is the input precision of its dots (a flush by ring tiles): "ieee" unless the
    config's ``flush_dot`` asks for TF32 tensor cores, since the dot builds the checkpoint."""
    key = (body.__name__, None if config is None else repr(config), dot_precision)
    if key not in _KERNELS:
        kwargs = {"static_shapes": False, "dot_precision": dot_precision}
        if config is not None:
            kwargs["config"] = config
        _KERNELS[key] = helion.kernel(**kwargs)(body)
    return _KERNELS[key]


def _views(mixed_qkv, a, dt_bias, shapes):
    """Zero-copy per-head views of the packed inputs."""
    B, H, HV, K, V = shapes.batch, shapes.num_q_heads, shapes.num_v_heads, shapes.key_dim, shapes.value_dim
    q_view = mixed_qkv[:, : H * K].unflatten(1, (H, K))
    k_view = mixed_qkv[:, H * K : 2 * H * K].unflatten(1, (H, K))
    v_view = mixed_qkv[:, 2 * H * K :].unflatten(1, (HV, V))
    return q_view, k_view, v_view, shapes.a.view(B, HV, K), shapes.dt_bias.view(HV, K)


PRECISIONS = ("fast", "precise")
# launches= -> config kind; 0 (L = 1 only) is the standard kernel, with its own table entries
LAUNCH_KINDS = {0: "standard", 1: "replayssm_fused", 2: "replayssm", 3: "replayssm_split"}


def _resolve_config(config, kind, device, dtype, shapes) -> tuple[helion.Config | None, dict]:
    """(Helion config, kernel options). An explicit ``helion.Config`` or table-style dict wins; ``None``
    reads the tuned table; ``"autotune"`` (used only by ``replayssm_kernels.tune --search helion``)
    leaves the Helion config to Helion's autotuner."""
    if config == "autotune":
        return None, dict(KERNEL_OPTIONS)
    return split_config(
        config if config is not None else load_config(kind, device, dtype, shapes),
        (shapes.value_dim, shapes.key_dim),
    )


# Device loops of ``_replayssm_state_body`` in Helion's ``range_*`` config order: [grid, ring d tiles
# (not with RING_ONCE), checkpoint K chunks, ...]: six with the flush branch in the same launch (then
# the flush's FK steps, its ring loop and the append), four without it, one fewer each with RING_ONCE
# (tests/test_kernels_cpu.py checks the K loop and the FK loop are the ones pipelined); with flush_keep
# the K loop is there twice (KEEP), both copies over the one block size, so one entry serves both.
_STATE_LOOPS = {True: 6, False: 4}  # keyed by "flush in the same launch"


def ring_once(cache_length: int, options: dict) -> bool:
    """Whether the state kernel loads the ring as one tile beside the checkpoint (``ring_prefetch``
    and a ring that fits one ``ring_tile``) instead of walking it in a loop before it."""
    return bool(options["ring_prefetch"]) and ring_block(cache_length) <= options["ring_tile"]


DOT_MIN = 16  # the smallest side of a Triton dot
# The flush-rows launch holds the whole batch's flush flags in every program (a [BB] tile and its
# cumsum); past this batch a split step keeps the per-row flush launch.
FLUSH_ROWS_MAX_BATCH = 4096


def flush_ring_tile(cache_length: int, options: dict, block_v: int, flush_block_k: int) -> int:
    """Ring positions per tile of a flush by tiles (``flush_tiles``), or 0 for the walk.

    A tile is a dot's inner side, so it has at least ``DOT_MIN`` positions (masked past the ring) and
    needs V and K tiles that wide; narrower flush tiles keep the walk."""
    most = options["flush_tiles"]
    if not most or block_v < DOT_MIN or flush_block_k < DOT_MIN:
        return 0
    return max(DOT_MIN, min(most, ring_block(cache_length)))


def _state_configs(
    config: helion.Config, options: dict, split: bool, ring_once: bool = False
) -> tuple[helion.Config, helion.Config]:
    """(state launch, flush launch) configs from one table entry. ``k_stages > 1`` pipelines the state
    launch's loop over checkpoint K chunks that deep; the flush launch of a split step has other loops,
    so it takes the entry without its ``range_*`` lists, with its own V tile and warps where the
    options ``flush_block_v`` / ``flush_warps`` set them (0: the state launch's)."""
    fields = {k: v for k, v in dict(config).items() if not k.startswith("range_")}
    if options["flush_block_v"]:
        fields["block_sizes"] = [options["flush_block_v"], *fields["block_sizes"][1:]]
    if options["flush_warps"]:
        fields["num_warps"] = options["flush_warps"]
    state = dict(config)
    stages = [0] * (_STATE_LOOPS[not split] - ring_once)
    stages[2 - ring_once] = options["k_stages"]  # the K chunks (as 0 and 1, 1 and below mean none)
    if not split:
        stages[3 - ring_once] = options["flush_k_stages"]  # the flush's FK steps
    if max(stages) > 1:
        state["range_num_stages"] = stages
    return helion.Config(**state), helion.Config(**fields)


def default_launches(cache_length: int, device: torch.device | str = "cpu") -> int:
    """The design ``launches=None`` runs on ``device``: 0 (the standard kernel) at L = 1, 3 from
    ``configs.split_flush_from(device)`` on (the device table's choice, ``configs.SPLIT_FLUSH_FROM_L``
    where it makes none), else 2."""
    if cache_length == 1:
        return 0
    return 3 if cache_length >= split_flush_from(device) else 2


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"`precision` must be one of {PRECISIONS}; got {precision!r}")


class Launch(NamedTuple):
    """One kernel launch of a decode step: which one, the body, its fixed config and its arguments.

    ``replayssm_kernels.inspect_codegen`` compiles the same objects the decode functions run."""

    name: str  # "fused", "ring_weights", "state", "flush", "flush_rows" or "standard"
    body: Callable
    config: helion.Config | None
    args: tuple
    # 0: after the launch before it. 1 or 2: at the same time as it, on a second stream (2: of high
    # priority), started first; the step ends when both are done (run_launches; in order off CUDA)
    beside: int = 0
    dot_precision: str = "ieee"  # of its dots (FLUSH_DOTS; the kernel option flush_dot)

    def __call__(self):
        return _kernel(self.body, self.config, self.dot_precision)(*self.args)


@functools.cache
def _side_stream(device: torch.device, priority: int) -> torch.cuda.Stream:
    """The second stream of ``run_launches``, one per (device, ``beside`` priority), made once."""
    return torch.cuda.Stream(device, priority=-1 if priority == 2 else 0)


def launch_groups(plan: list[Launch], concurrent: bool) -> list[tuple[Launch, ...]]:
    """A step's launches as groups run one after the other. With ``concurrent``, a launch marked
    ``beside`` forms a group with the launch ahead of it, ``(beside, ahead)``: the two run at once.
    Without it (off CUDA) every group is one launch, in plan order."""
    groups, i = [], 0
    while i < len(plan):
        if concurrent and i + 1 < len(plan) and plan[i + 1].beside:
            groups.append((plan[i + 1], plan[i]))
            i += 2
        else:
            groups.append((plan[i],))
            i += 1
    return groups


def run_launches(plan: list[Launch]) -> None:
    """Run a step's launches (``launch_groups``). In a group of two, the ``beside`` launch starts first,
    on a second stream that waits for the work before it; the other runs on the current stream, which
    then waits for both. (They touch disjoint data: see ``_flush_rows_body``'s ``OWN``.) Works under
    CUDA graph capture: a fork and a join."""
    device = next(a.device for a in plan[0].args if isinstance(a, torch.Tensor))
    for group in launch_groups(plan, device.type == "cuda"):
        if len(group) == 1:
            group[0]()
            continue
        beside, ahead = group
        main, side = torch.cuda.current_stream(device), _side_stream(device, beside.beside)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            beside()
        ahead()
        main.wait_stream(side)


def replayssm_launches(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    d_cache: torch.Tensor,
    k_cache: torch.Tensor,
    g_cache: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    write_pos: torch.Tensor,
    force_flush: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    precision: str = "fast",
    launches: int | None = None,
    config: helion.Config | dict | str | None = None,
    check_values: bool | None = None,
) -> list[Launch]:
    """The launches of one ReplaySSM decode step, validated and configured but not run (the arguments
    and keywords of ``helion_fused_recurrent_kda_replayssm_decode``)."""
    shapes = validate_replayssm_inputs(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache,
        out, ssm_state_indices, write_pos, force_flush, check_values=check_values,
    )  # fmt: skip
    check_kernel_support(shapes, initial_state, out)
    _check_precision(precision)

    if launches is None:
        launches = default_launches(shapes.cache_length, mixed_qkv.device)
    if launches not in LAUNCH_KINDS:
        raise ValueError(
            "`launches` must be 1 (one fused launch), 2 (ring weights, then state) or 3 (ring weights, "
            f"state, then the flush rows' checkpoints), or 0 (the standard kernel, cache_length 1 only); "
            f"got {launches!r}"
        )
    if launches == 0:
        if shapes.cache_length != 1:
            raise ValueError(
                "`launches=0` runs the standard decode kernel, which is a ReplaySSM step only when every "
                f"step flushes from an empty ring: cache_length 1; the rings have cache_length "
                f"{shapes.cache_length} (d_cache {tuple(d_cache.shape)}). Use launches=None, 1, 2 or 3."
            )
        # every step flushes with c = 0: S0 <- S0 diag(alpha) + u k^T and nothing is appended, so the
        # rings, write_pos and force_flush are not read
        return _standard_plan(
            mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
            use_qk_l2norm_in_kernel, lower_bound, shapes, config,
        )  # fmt: skip
    kind = LAUNCH_KINDS[launches]
    config, options = _resolve_config(config, kind, mixed_qkv.device, initial_state.dtype, shapes)
    if options["flush_dot"] not in FLUSH_DOTS:
        raise ValueError(f"kernel option `flush_dot` must be one of {FLUSH_DOTS}; got {options['flush_dot']!r}")
    dot = options["flush_dot"] if precision == "fast" else "ieee"  # the precise flush has no dot
    if dot == "tf32" and d_cache.dtype == torch.float32:  # one pass rounds an fp32 ring's d: three do not
        dot = "tf32x3"
    B, HV, K, V, L = shapes.batch, shapes.num_v_heads, shapes.key_dim, shapes.value_dim, shapes.cache_length
    options["flush_block_v"] = min(options["flush_block_v"], V)
    q_view, k_view, v_view, a3, dt2 = _views(mixed_qkv, a, dt_bias, shapes)
    force = write_pos if force_flush is None else force_flush
    flags = (bool(use_qk_l2norm_in_kernel), lower_bound is not None, force_flush is not None, shapes.heads_per_q)
    scalars = (float(scale), 0.0 if lower_bound is None else float(lower_bound))
    flush_args = (ring_chunk(L, options["ring_chunk"]), precision == "precise", min(options["flush_block_k"], K))
    if launches == 1:
        args = (
            q_view, k_view, v_view, a3, b, A_log, dt2, initial_state, d_cache, k_cache, g_cache, out,
            ssm_state_indices, write_pos, force, *scalars, *flags, ring_block(L), *flush_args,
        )  # fmt: skip
        return [Launch("fused", _replayssm_fused_body, config, args, dot_precision=dot)]
    # Launch 1 (K side): the ring scalars, e^Gamma alpha (also times q and k) and q . k per (row, head);
    # appends k and g.
    f32 = {"device": mixed_qkv.device, "dtype": torch.float32}
    coef, xs, qk = torch.empty(B, HV, 2, L, **f32), torch.empty(B, HV, 2, K, **f32), torch.empty(B, HV, **f32)
    decay = torch.empty(B, HV, K, **f32)
    split = launches == 3
    once = ring_once(L, options)
    state_config, flush_config = _state_configs(config, options, split, once)
    # ring positions per tile of a flush by tiles (fast precision only), 0: the walk
    flush_v = (flush_config if split else state_config).block_sizes[0]
    fw = flush_ring_tile(L, options, flush_v, flush_args[2]) if precision == "fast" else 0
    # launch 3 over the flush rows only (see _flush_rows_body); with flush_overlap it takes those rows
    # whole (their output too) and runs beside the state launch; with flush_weights launch 1 hands it
    # the ring weights W_i alpha kappa_i of flush rows
    rows = split and fw > 0 and options["flush_programs"] > 0 and B <= FLUSH_ROWS_MAX_BATCH
    overlap = options["flush_overlap"] if rows else 0
    # the flush by ring tiles, in the flush-rows launch or (two launches) in the state launch
    hand_w = (rows or not split) and fw > 0 and bool(options["flush_weights"])
    w_ring = torch.empty(B, HV, L, K, **f32) if hand_w else decay  # decay: a stand-in, never touched
    weights_args = (
        q_view, k_view, a3, b, A_log, dt2, k_cache, g_cache, ssm_state_indices, write_pos, force,
        coef, xs, qk, decay, w_ring, *scalars, *flags, ring_chunk(L, options["ring_chunk"]), hand_w,
        options["prep_heads"] if HV % options["prep_heads"] == 0 else 1,
    )  # fmt: skip
    weights_fields = {"block_sizes": [], "num_warps": options["prep_warps"], "num_stages": 1}
    if options["prep_stages"] > 1:  # the loops: [grid, ring chunks, append]; the ring chunks' pipelined
        weights_fields["range_num_stages"] = [0, options["prep_stages"], 0]
    weights_config = helion.Config(**weights_fields)
    plan = [Launch("ring_weights", _ring_weights_body, weights_config, weights_args)]
    # Launch 2 (state side): output, d append and, with launches=2, flush rows' checkpoint; with
    # launches=3 the flush rows' u goes to u_buf and launch 3 writes their checkpoint (or, with
    # flush_overlap, launch 3 takes flush rows whole).
    # out[:, 0]: a stand-in, never touched
    u_buf = torch.empty(B, HV, V, **f32) if split and not overlap else out[:, 0]
    args = (
        q_view, k_view, v_view, a3, b, A_log, dt2, initial_state, initial_state, d_cache, k_cache, g_cache, coef,
        xs, qk, decay, w_ring, u_buf, out, ssm_state_indices, write_pos, force, *scalars, *flags,
        min(ring_block(L), options["ring_tile"]), once, *flush_args, fw > 0, max(fw, DOT_MIN),
    )  # fmt: skip
    keep = bool(options["flush_keep"]) and not split
    # STATE, FLUSH, SKIP_FLUSH, HAND_W, KEEP
    state_flags = (True, not split, bool(overlap), hand_w and not split, keep)
    plan.append(Launch("state", _replayssm_state_body, state_config, (*args, *state_flags), dot_precision=dot))
    if rows:
        # ONE: an item loads its checkpoint tile once and is straight-line code (one ring tile)
        one = bool(overlap) and hand_w and flush_args[2] == K and ring_block(L) == fw
        rows_fields = {"block_sizes": [], "num_warps": flush_config.num_warps, "num_stages": 1}
        if one and options["flush_stages"] > 1:  # the loops: [programs, work items]; the items' pipelined
            rows_fields["range_num_stages"] = [0, options["flush_stages"]]
        rows_config = helion.Config(**rows_fields)
        programs = torch.empty(options["flush_programs"], device=mixed_qkv.device, dtype=torch.int8)  # P, by length
        rows_args = (
            k_view, a3, A_log, dt2, initial_state, initial_state, d_cache, k_cache, g_cache, decay, w_ring, u_buf,
            v_view, b, coef, xs, qk, out, programs, ssm_state_indices, write_pos, force, scalars[1], *flags,
            flush_args[2], fw, flush_config.block_sizes[0], ring_block(B), ring_block(L), bool(overlap), hand_w, one,
        )  # fmt: skip
        plan.append(Launch("flush_rows", _flush_rows_body, rows_config, rows_args, overlap, dot))
    elif split:
        flush_flags = (False, True, False, False, False)
        plan.append(Launch("flush", _replayssm_state_body, flush_config, (*args, *flush_flags), dot_precision=dot))
    return plan


def helion_fused_recurrent_kda_replayssm_decode(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    d_cache: torch.Tensor,
    k_cache: torch.Tensor,
    g_cache: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    write_pos: torch.Tensor,
    force_flush: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    precision: str = "fast",
    launches: int | None = None,
    config: helion.Config | dict | str | None = None,
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One ReplaySSM decode step; same signature and semantics as
    ``replayssm_ref.replayssm_decode_step`` (and as sglang's Helion kernel of the same name).

    Precision modes differ only on flush rows, in how the state is rebuilt before the checkpoint
    write, both in fp32: ``"fast"`` sums ``S0 e^Gamma + sum_i d_i (W_i * kappa_i)^T`` (one independent
    rank-1 term per ring entry, the weights as running products of ``e^gamma``); ``"precise"`` folds
    the entries one by one (``S <- S e^gamma_i + d_i kappa_i^T``, the recurrence's order, twice the
    tile arithmetic). Outputs and non-flush steps are identical in both.

    ``launches=2`` runs the ring weights, then the state; ``3`` also moves the flush rows' checkpoint
    write to its own launch; ``1`` runs the whole step as one fused kernel; ``0`` (cache_length 1
    only, where every step flushes from an empty ring) runs the standard decode kernel on the
    checkpoint; ``None`` (the default) picks 0 at L = 1, else 2 or 3 by ring length and device
    (``default_launches``, from the timings in ``results/bench/NOTES.md``). All are
    graph-capturable and give the same results up to rounding.
    ``config`` overrides the tuned config from ``replayssm_kernels/configs``.
    """
    plan = replayssm_launches(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache, out,
        ssm_state_indices, write_pos, force_flush, use_qk_l2norm_in_kernel, lower_bound,
        precision=precision, launches=launches, config=config, check_values=check_values,
    )  # fmt: skip
    run_launches(plan)
    return out, initial_state


def standard_launches(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    config: helion.Config | dict | str | None = None,
    check_values: bool | None = None,
) -> list[Launch]:
    """The one launch of a standard decode step, validated and configured but not run."""
    shapes = validate_decode_inputs(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, check_values=check_values
    )
    check_kernel_support(shapes, initial_state, out)
    return _standard_plan(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
        use_qk_l2norm_in_kernel, lower_bound, shapes, config,
    )  # fmt: skip


def _standard_plan(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
    use_qk_l2norm_in_kernel, lower_bound, shapes, config,
) -> list[Launch]:  # fmt: skip
    """The standard kernel's one launch on validated inputs (standard decode, and ReplaySSM at L = 1)."""
    config, _ = _resolve_config(config, "standard", mixed_qkv.device, initial_state.dtype, shapes)
    q_view, k_view, v_view, a3, dt2 = _views(mixed_qkv, a, dt_bias, shapes)
    args = (
        q_view, k_view, v_view, a3, b, A_log, dt2, initial_state, out, ssm_state_indices,
        float(scale), 0.0 if lower_bound is None else float(lower_bound),
        bool(use_qk_l2norm_in_kernel), lower_bound is not None, shapes.heads_per_q,
    )  # fmt: skip
    return [Launch("standard", _standard_body, config, args)]


def helion_fused_recurrent_kda_packed_decode(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    config: helion.Config | dict | str | None = None,
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Standard KDA decode (read state, update, write back); same semantics as
    ``replayssm_ref.recurrent_decode_step``. The baseline ReplaySSM is measured against."""
    (launch,) = standard_launches(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
        use_qk_l2norm_in_kernel, lower_bound, config=config, check_values=check_values,
    )  # fmt: skip
    launch()
    return out, initial_state


__all__ = [
    "PRECISIONS",
    "Launch",
    "default_launches",
    "helion_fused_recurrent_kda_packed_decode",
    "helion_fused_recurrent_kda_replayssm_decode",
    "launch_groups",
    "replayssm_launches",
    "run_launches",
    "ring_block",
    "standard_launches",
]
