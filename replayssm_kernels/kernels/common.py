"""Device helpers shared by the kernel bodies: the token's gate and norms, a row's cursor and slot, and
the three forms of a flush's ring sum.

Helion inlines these at trace time; they are plain tensor code on tiles. The names are the
reference's (``replayssm_ref.replay``): ``S0`` the checkpoint, ``gamma``/``kappa``/``d`` a ring entry's
log decay, key and delta, ``W_i = exp(sum_{i<m<c} gamma_m)`` its weight, ``alpha = e^g`` the current
token's decay, ``c`` the row's cursor (live entries are ``i < c``; the rest are never read).

Both gates run the same code (``HEAD_GATE``: Gated DeltaNet). GDN's gate tensors come with a key-channel
axis of one (``a [B, HV, 1]``, ``dt_bias [HV, 1]``, ``g_cache [slots, HV, L, 1]``) and are read through
:func:`gate_channel`, so every channel of a tile reads its head's one value (one load per warp) and the
gate arithmetic stays KDA's; the one store (the ring's append) is masked to channel 0.
"""

from __future__ import annotations

import helion.language as hl
import torch
from helion.language.tile_interface import TileInterface

LOG1P_THRESHOLD = 20.0  # softplus(x) = x above this, as in the reference
L2NORM_EPS = 1e-6
DOT_MIN = 16  # the smallest side of a Triton dot


def l2_scale(x, USE_L2NORM, rows=False):
    """The factor that l2-normalises the fp32 vector ``x`` (1 without l2norm); with ``rows``, each row
    of the ``[R, K]`` tile ``x`` (an ``[R, 1]`` factor)."""
    if USE_L2NORM:
        sq = (x * x).sum(1, keepdim=True) if rows else (x * x).sum(0)
        return 1.0 / torch.sqrt(sq + L2NORM_EPS)  # not rsqrt: Triton's interpreter lacks it
    return 1.0


def gate_channel(channels, HEAD_GATE):
    """The index into a gate tensor's last axis for the key ``channels`` (a tile or an ``hl.arange``):
    the channels themselves (KDA), or channel 0 for each (GDN: one value per head)."""
    if HEAD_GATE:
        return (channels.index if isinstance(channels, TileInterface) else channels) * 0
    return channels


def gate(a_t, dt_t, A_log_j, lower_bound, BOUNDED):
    """The per-channel log decay g (fp32) of any slice of the K channels: ``lower_bound * sigmoid(A x)``
    (bounded) or ``-A softplus(x)``, ``x = a + dt_bias``, ``A = exp(A_log)``."""
    x = a_t.to(torch.float32) + dt_t.to(torch.float32)
    A = torch.exp(A_log_j.to(torch.float32))
    if BOUNDED:
        return lower_bound * torch.sigmoid(A * x)
    # where() with two tensors: a Python scalar branch breaks TRITON_INTERPRET codegen.
    return -A * torch.where(x <= LOG1P_THRESHOLD, torch.log1p(torch.exp(torch.minimum(x, x * 0 + LOG1P_THRESHOLD))), x)


def token(q_t, k_t, a_t, dt_t, A_log_j, b_t, scale, lower_bound, USE_L2NORM, BOUNDED, rows=False):
    """The current token in fp32: ``(scale * q, k)`` normalised, the gate ``g`` and ``beta``; with
    ``rows``, for ``[R, K]`` tiles of R heads (``A_log_j`` then ``[R, 1]``)."""
    q = q_t.to(torch.float32)
    k = k_t.to(torch.float32)
    q = q * (l2_scale(q, USE_L2NORM, rows) * scale)
    k = k * l2_scale(k, USE_L2NORM, rows)
    g = gate(a_t, dt_t, A_log_j, lower_bound, BOUNDED)
    beta = torch.sigmoid(b_t.to(torch.float32))
    return q, k, g, beta


def row_setup(ssm_state_indices, write_pos, force_flush, num_slots, row, tile_b, L, HAS_FORCE):
    """``(valid, slot [1], c, flush)`` of a batch row.

    A row is valid when its slot is in ``[0, num_slots)`` and its cursor in ``[0, L)``; any other row
    (padding, or a corrupted slot or cursor) replays nothing (c = 0) and writes nothing; it reads its
    checkpoint (slot 0 when the slot is outside the pool), which is harmless.
    The slot is a 1-element vector (``ssm_state_indices[tile_b]``): Helion 1.5 generates wrong Triton
    code for a 0-d tensor used as an index, so tiles loaded with it carry a leading size-1 axis. (A
    helper must index with ``hl.load``: plain subscripts with tile offsets only work in a body.)"""
    index = hl.load(ssm_state_indices, [row])
    cursor = hl.load(write_pos, [row])
    valid = (index >= 0) & (index < num_slots) & (cursor >= 0) & (cursor < L)
    slot = hl.load(ssm_state_indices, [tile_b])
    slot = torch.where((slot >= 0) & (slot < num_slots), slot, slot * 0)  # from the index alone: no wait
    c = torch.where(valid, cursor, cursor * 0)
    flush = c == L - 1
    if HAS_FORCE:
        flush = flush | (hl.load(force_flush, [row]) != 0)
    return valid, slot, c, flush


def flush_weight(decay_t, a3, dt2, A_log, row, j, tile_fk, lower_bound, BOUNDED, PREDECAYED, HEAD_GATE):
    """The weight a flush that builds its own weights starts from, ``W_{c-1} alpha`` over ``tile_fk``:
    the token's ``alpha`` (``W_{c-1} = 1``), or with ``PREDECAYED`` ``e^P alpha`` for every entry (the
    keys carry the rest): ``decay_t``, launch 1's ``e^Gamma alpha`` over the same channels."""
    if PREDECAYED:
        return decay_t
    return torch.exp(token_gate(a3, dt2, hl.load(A_log, [j]), row, j, tile_fk, lower_bound, BOUNDED, HEAD_GATE))


def token_gate(a3, dt2, A_j, row, j, channels, lower_bound, BOUNDED, HEAD_GATE):
    """The token's log decay g over the K tile ``channels`` of value head ``j`` (a helper also because a
    tile assigned to a variable in a body breaks Helion's type propagation)."""
    ch = gate_channel(channels, HEAD_GATE)
    return gate(hl.load(a3, [row, j, ch]), hl.load(dt2, [j, ch]), A_j, lower_bound, BOUNDED)


def walk_entry(
    S, w_alpha, d_cache, k_cache, g_cache, slot, h, j, i, c, tile_b, tile_v, tile_fk, PREDECAYED, HEAD_GATE
):  # fmt: skip
    """One ring position ``i`` of a flush that walks the ring newest first over one ``[BV, FK]`` tile:
    ``(S + d_i (W_i alpha kappa_i)^T, W_{i-1} alpha)``, the weights as running products of ``e^gamma``
    (``w_alpha`` comes in as ``W_i alpha``). Positions ``>= c`` load nothing and add nothing.
    ``PREDECAYED``: keys per value head carry their weights, ``w_alpha`` is ``e^P alpha`` for every
    entry and no gate is read.

    The loop over positions stays in each body (Helion traces device loops only in a kernel body):
    ``for tile_f in hl.tile((L - c) // CH, L // CH, block_size=1)`` over chunks of ``CH`` positions
    (``hl.static_range``), ``i = L - 1 - tile_f.begin * CH - t``, starting at the chunk holding c - 1."""
    live_k = (hl.zeros([tile_b, tile_fk], dtype=torch.int32) + i) < c
    kappa = hl.load(k_cache, [slot, j if PREDECAYED else h, i, tile_fk], extra_mask=live_k).to(torch.float32)
    live_v = (hl.zeros([tile_b, tile_v], dtype=torch.int32) + i) < c
    d = hl.load(d_cache, [slot, j, i, tile_v], extra_mask=live_v).to(torch.float32)
    S = S + d.unsqueeze(2) * (w_alpha * kappa).unsqueeze(1)
    if PREDECAYED:
        return S, w_alpha
    gamma = hl.load(g_cache, [slot, j, i, gate_channel(tile_fk, HEAD_GATE)], extra_mask=live_k).to(torch.float32)
    return S, w_alpha * torch.exp(gamma)


def handed_tile(S, w_ring, d_cache, row, slot, j, pos, live, cols, in_v, tile_fk):
    """One ``[FW, FK]`` ring tile of a flush from launch 1's weights ``W_i alpha kappa_i`` (``w_ring``):
    ``S + sum_i d_i w_i^T`` over the tile, two loads and a ``[BV, FW] x [FW, FK]`` dot. ``live`` is
    ``[1, FW]`` (positions ``>= c`` load nothing), ``in_v`` masks the V channels ``cols`` (``None``:
    a tile, masked already), ``row`` indexes ``w_ring``."""
    # (unsqueeze, not subscripts: a slice in a helper can fail Helion's lowering)
    w = hl.load(w_ring, [row, j, pos, tile_fk], extra_mask=live.unsqueeze(2))  # [1, FW, FK]
    d_live = live.unsqueeze(2) if in_v is None else live.unsqueeze(2) & in_v.unsqueeze(0).unsqueeze(0)
    d_t = hl.load(d_cache, [slot, j, pos, cols], extra_mask=d_live)
    return S + torch.bmm(torch.transpose(d_t.to(torch.float32), 1, 2), w)  # [1, BV, FK]: a dot


def own_tile(
    S, newer, d_cache, k_cache, g_cache, slot, h, j, pos, live, later, cols, in_v, tile_fk, alpha, PREDECAYED,
    HEAD_GATE,
):  # fmt: skip
    """One ``[FW, FK]`` ring tile of a flush that builds its own weights, newest tile first:
    ``(S + sum_i d_i (W_i alpha kappa_i)^T, newer + sum_i gamma_i)`` over the tile.

    The tile's ``W_i`` come from one reverse scan of gamma shifted by one position (the reference's
    suffix sums: no subtraction) plus ``newer``, the sum of gamma over the newer tiles; then one dot.
    ``later`` masks gamma shifted by one (``i + 1`` live and in this tile); the other masks are
    ``handed_tile``'s; ``alpha`` is ``[1, FK]`` (``flush_weight``). ``PREDECAYED``: the weights are the
    keys (per value head) times ``alpha``, no gate is read."""
    kappa = hl.load(k_cache, [slot, j if PREDECAYED else h, pos, tile_fk], extra_mask=live[:, :, None])
    d_live = live[:, :, None] if in_v is None else live[:, :, None] & in_v[None, None, :]
    if PREDECAYED:
        d_t = hl.load(d_cache, [slot, j, pos, cols], extra_mask=d_live)
        w = kappa.to(torch.float32) * alpha[:, None, :]
        return S + torch.bmm(torch.transpose(d_t.to(torch.float32), 1, 2), w), newer
    ch = gate_channel(tile_fk, HEAD_GATE)
    gamma = hl.load(g_cache, [slot, j, pos, ch], extra_mask=live[:, :, None]).to(torch.float32)
    gamma_next = hl.load(g_cache, [slot, j, pos + 1, ch], extra_mask=later[:, :, None]).to(torch.float32)
    d_t = hl.load(d_cache, [slot, j, pos, cols], extra_mask=d_live)
    suffix = hl.cumsum(gamma_next, 1, reverse=True) + newer.unsqueeze(1)  # [1, FW, FK]
    w = torch.exp(suffix) * kappa.to(torch.float32) * alpha[:, None, :]  # W_i alpha kappa_i
    S = S + torch.bmm(torch.transpose(d_t.to(torch.float32), 1, 2), w)  # [1, BV, FK]: a dot
    return S, newer + gamma.sum(1)


def args_record(body) -> type:
    """The typed record of ``body``'s arguments: a frozen dataclass with one field per parameter, in
    order, typed by the parameter's annotation (``hl.constexpr`` ones hold plain Python values). The
    planner builds it by name and a launch calls the body with its fields by name, so the body's
    signature is the one list of a launch's arguments."""
    import dataclasses
    import inspect

    fields = [(name, p.annotation) for name, p in inspect.signature(body).parameters.items()]
    name = "".join(part.title() for part in body.__name__.removesuffix("_body").split("_")) + "Args"
    record = dataclasses.make_dataclass(name, fields, frozen=True)
    record.__module__ = body.__module__
    return record
