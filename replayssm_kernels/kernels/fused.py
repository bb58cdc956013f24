"""A ReplaySSM step in one launch, for rings whose entry weights are scalars or one shared K-vector.

Where the per-entry weight ``W_i alpha`` needs no per-channel work (Gated DeltaNet's raw ring: one log
decay per head, so ``W_i`` is a scalar; the ``predecayed`` format: every entry shares ``e^P alpha``), the
K side of a step is a ``[c, K]`` mat-vec of the key ring against two ready vectors, cheap enough to
repeat in each V tile's program. This design does so, and drops launch 1 (``ring_weights``), its
hand-off buffers and the gap between two launches: the latency regime's lever (small batches).

One program per (row, value head, V tile): the token's gate and norms over the whole K; the ring's
coefficients ``rho_i kappa_i . (e^G alpha x)`` for x = q, k, each tile of ``RB`` positions loaded with
its ``d`` tile (before the checkpoint loop when the ring fits one tile, so the loads fly together); the
checkpoint's two mat-vecs ``[BV, KC]`` chunk by chunk; the output; then the flush (walking the ring,
``FK`` channels at a time) or the appends (``d`` by every V tile, ``k`` and ``g`` by V tile 0).

``G`` is the log decay since the checkpoint: ``T = sum_{m<c} gamma_m`` for GDN (``rho_i = W_i``, from a
reverse scan inside the tile plus the sum over newer tiles: no subtraction), ``P_{c-1}`` for
``PREDECAYED`` (``rho_i = 1``: the keys carry the rest). KDA's raw ring (per-channel ``W_i``) is not
served here: its weights are launch 1's work (``docs/lab_notes.md``, row 6).
"""

from __future__ import annotations

import helion.language as hl
import torch
from helion.language.tile_interface import TileInterface

from .common import args_record, gate_channel, l2_scale, row_setup, token, token_gate, walk_entry

# (helpers use unsqueeze, not subscripts: a slice in a helper can fail Helion's lowering)
FUSED_RING_TILE = 16  # a ring of at most this many positions is one tile, loaded beside the checkpoint


def since_checkpoint(g_cache, slot, j, c, channels, everything, HEAD_GATE):
    """``G`` over ``channels``, ``[1, FK]`` (the slot's axis first): the log decay from the checkpoint
    through entry ``c - 1``, 0 on an empty ring. GDN: ``T``, the sum of the head's ``c`` gate entries
    (``everything``: ``hl.arange`` of the ring's power-of-two length, masked to ``< c``), broadcast over
    ``channels``; predecayed: the prefix sum ``P_{c-1}``, one load."""
    idx = channels.index if isinstance(channels, TileInterface) else channels
    if HEAD_GATE:
        gam = hl.load(g_cache, [slot, j, everything, 0], extra_mask=(everything < c).unsqueeze(0))  # [1, LB]
        return gam.sum(1).unsqueeze(1) + (idx * 0).to(torch.float32).unsqueeze(0)  # [1, FK]
    last = (idx * 0 + c) > 0
    prev = slot * 0 + c - 1  # a [1] vector like the slot: Helion 1.5 miscompiles a 0-d index
    P = hl.load(g_cache, [slot, j, prev, channels], extra_mask=last.unsqueeze(0))
    while P.dim() > 2:  # [1, FK]: the slot's axis (Helion's interpreter also keeps the cursor's)
        P = P.sum(0)
    return P


def tile_gates(g_cache, slot, j, c, pos, end, everything, HEAD_GATE):
    """GDN's ``(gamma one position on, live and before end; sum of gamma over [end, c))`` for the ring
    tile of positions ``pos`` ending before ``end``, ``[1, RB]`` and ``[1, 1]``; ``(0, 0.0)`` otherwise."""
    if not HEAD_GATE:
        return 0, 0.0
    after = (everything >= end) & (everything < c)
    newer = hl.load(g_cache, [slot, j, everything, 0], extra_mask=after.unsqueeze(0)).sum(1).unsqueeze(1)
    nxt = pos + 1
    gam_next = hl.load(g_cache, [slot, j, nxt, 0], extra_mask=((nxt < c) & (nxt < end)).unsqueeze(0))
    return gam_next, newer


def ring_coefficients(kappa, gam_next, newer, yq, yk, HEAD_GATE):
    """``(rho_i kappa_i . yq, rho_i kappa_i . yk)`` of one ring tile, ``[1, RB]`` each: ``kappa`` the
    tile's keys ``[1, RB, K]`` (zero where not live), ``y`` the ready K-vectors ``[1, K]``. GDN: ``rho_i = W_i =
    exp(sum_{i<m<c} gamma_m)``, the reverse scan of ``gam_next`` (gamma one position on, live and in the
    tile) plus ``newer`` (the sum over newer tiles)."""
    cq = (kappa * yq.unsqueeze(1)).sum(2)
    ck = (kappa * yk.unsqueeze(1)).sum(2)
    if HEAD_GATE:
        w = torch.exp(hl.cumsum(gam_next, 1, reverse=True) + newer)
        return cq * w, ck * w
    return cq, ck


def fused_body(
    q_view: torch.Tensor,  # [B, H, K]
    k_view: torch.Tensor,  # [B, H, K]
    v_view: torch.Tensor,  # [B, HV, V]
    a3: torch.Tensor,  # [B, HV, K]   (HEAD_GATE: [B, HV, 1])
    b: torch.Tensor,  # [B, HV]
    A_log: torch.Tensor,  # [HV]
    dt2: torch.Tensor,  # [HV, K]   (HEAD_GATE: [HV, 1])
    initial_state: torch.Tensor,  # [slots, HV, V, K], read
    state_out: torch.Tensor,  # initial_state again, written by the flush (see kernels.state)
    d_cache: torch.Tensor,  # [slots, HV, L, V]
    k_cache: torch.Tensor,  # [slots, H, L, K]   (PREDECAYED: [slots, HV, L, K])
    g_cache: torch.Tensor,  # [slots, HV, L, K]   (PREDECAYED: prefix sums; HEAD_GATE: [slots, HV, L, 1])
    out: torch.Tensor,  # [B, 1, HV, V]
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32
    force_flush: torch.Tensor | None,  # [B] int32
    num_slots: int,
    scale: float,
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HAS_FORCE: hl.constexpr,
    HPQ: hl.constexpr,  # value heads per q/k head
    RB: hl.constexpr,  # ring positions per tile
    LB: hl.constexpr,  # the ring length rounded up to a power of two (GDN's gate sums)
    RING_ONCE: hl.constexpr,  # the ring fits one RB tile: load it beside the checkpoint
    CH: hl.constexpr,  # ring positions per unrolled chunk of the flush's walk (divides L)
    FK: hl.constexpr,  # K channels per step of the flush
    PREDECAYED: hl.constexpr,  # the predecayed ring format (KDA, bounded gate)
    HEAD_GATE: hl.constexpr,  # Gated DeltaNet: one log decay per value head (common.gate_channel)
) -> torch.Tensor:
    B = q_view.size(0)
    K = hl.specialize(q_view.size(2))
    HV = v_view.size(1)
    V = hl.specialize(v_view.size(2))
    L = hl.specialize(d_cache.size(2))
    block_v = hl.register_block_size(V)
    block_k = hl.register_block_size(K)  # the checkpoint's K chunk
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        row = tile_b.begin
        j = tile_j.begin
        h = j // HPQ
        kh = j if PREDECAYED else h  # the key ring's head
        valid, slot, c, flush = row_setup(
            ssm_state_indices, write_pos, force_flush, num_slots, row, tile_b, L, HAS_FORCE
        )  # fmt: skip
        keys = hl.arange(K)
        everything = hl.arange(LB)
        ch = gate_channel(keys, HEAD_GATE)
        A_j = hl.load(A_log, [j])
        q, k, g, beta = token(
            q_view[row, h, :], k_view[row, h, :], hl.load(a3, [row, j, ch]), hl.load(dt2, [j, ch]), A_j,
            hl.load(b, [row, j]), scale, lower_bound, USE_L2NORM, BOUNDED,
        )  # fmt: skip
        G = since_checkpoint(g_cache, slot, j, c, keys, everything, HEAD_GATE)
        # The ring's vectors: e^G alpha x (predecayed) or alpha x (GDN: W_i carry the rest)
        ring_w = torch.exp(G * 0 + g[None, :]) if HEAD_GATE else torch.exp(G + g[None, :])  # [1, K]
        yq, yk = ring_w * q[None, :], ring_w * k[None, :]
        q_scale = l2_scale(q_view[row, h, :].to(torch.float32), USE_L2NORM) * scale
        k_scale = l2_scale(k_view[row, h, :].to(torch.float32), USE_L2NORM)
        v = v_view[row, j, tile_v].to(torch.float32)

        # 1. S_pre x for x = q, k: the ring's d times the coefficients, and the checkpoint's two
        #    mat-vecs one [BV, KC] chunk at a time (positions >= c load nothing)
        acc_q = hl.zeros([tile_b, tile_v], dtype=torch.float32)
        acc_k = hl.zeros([tile_b, tile_v], dtype=torch.float32)
        if RING_ONCE:
            pos = hl.arange(RB)
            live = (pos < c)[None, :]  # [1, RB]
            kappa = hl.load(k_cache, [slot, kh, pos, keys], extra_mask=live[:, :, None]).to(torch.float32)
            d_all = hl.load(d_cache, [slot, j, pos, tile_v], extra_mask=live[:, :, None])  # [1, RB, BV]
            gam_next = hl.load(g_cache, [slot, j, pos + 1, 0], extra_mask=(pos + 1 < c)[None, :]) if HEAD_GATE else 0
            coef_q, coef_k = ring_coefficients(kappa, gam_next, 0.0, yq, yk, HEAD_GATE)
        else:
            for tile_i in hl.tile(0, c, block_size=RB):  # ends at c
                kappa = k_cache[slot, kh, tile_i, :].to(torch.float32)  # [1, RB, K]
                gam_next, newer = tile_gates(
                    g_cache, slot, j, c, tile_i.index, tile_i.begin + RB, everything, HEAD_GATE
                )
                cq, ck = ring_coefficients(kappa, gam_next, newer, yq, yk, HEAD_GATE)
                d = d_cache[slot, j, tile_i, tile_v].to(torch.float32)  # [1, RB, BV]
                acc_q = acc_q + (d * cq[:, :, None]).sum(1)
                acc_k = acc_k + (d * ck[:, :, None]).sum(1)
        for tile_k in hl.tile(K, block_size=block_k):
            S0 = initial_state[slot, j, tile_v, tile_k].to(torch.float32)  # [1, BV, KC]
            g_k = token_gate(a3, dt2, A_j, row, j, tile_k, lower_bound, BOUNDED, HEAD_GATE)
            decay_k = torch.exp(since_checkpoint(g_cache, slot, j, c, tile_k, everything, HEAD_GATE) + g_k[None, :])
            xq = decay_k * (q_view[row, h, tile_k].to(torch.float32) * q_scale)[None, :]  # e^G alpha q, [1, KC]
            xk = decay_k * (k_view[row, h, tile_k].to(torch.float32) * k_scale)[None, :]
            acc_q = acc_q + (S0 * xq[:, None, :]).sum(2)
            acc_k = acc_k + (S0 * xk[:, None, :]).sum(2)
        if RING_ONCE:
            acc_q = acc_q + (d_all.to(torch.float32) * coef_q[:, :, None]).sum(1)
            acc_k = acc_k + (d_all.to(torch.float32) * coef_k[:, :, None]).sum(1)
        sq = acc_q.sum(0)  # [BV]
        sk = acc_k.sum(0)

        # 2. The current token.
        u = beta * (v - sk)
        o = sq + u * (q * k).sum(0)
        out[row, 0, j, tile_v] = torch.where(valid, o, hl.zeros([tile_v], dtype=torch.float32)).to(out.dtype)

        # 3. Flush rows rebuild the post-token state and rewrite the checkpoint, FK channels at a time,
        #    walking the ring newest first (common.walk_entry).
        if valid & flush:
            for tile_fk in hl.tile(K, block_size=FK):
                S = initial_state[slot, j, tile_v, tile_fk].to(torch.float32)  # [1, BV, FK]
                g_f = token_gate(a3, dt2, A_j, row, j, tile_fk, lower_bound, BOUNDED, HEAD_GATE)
                decay_f = torch.exp(
                    since_checkpoint(g_cache, slot, j, c, tile_fk, everything, HEAD_GATE) + g_f[None, :]
                )
                S = S * decay_f[:, None, :]  # S0 e^G alpha
                start = decay_f if PREDECAYED else torch.exp(g_f)[None, :]  # W_{c-1} alpha (common.flush_weight)
                w_alpha = hl.zeros([tile_b, tile_fk], dtype=torch.float32) + start  # W_i alpha
                for tile_f in hl.tile((L - c) // CH, L // CH, block_size=1):
                    for t in hl.static_range(CH):
                        i = L - 1 - tile_f.begin * CH - t
                        S, w_alpha = walk_entry(
                            S, w_alpha, d_cache, k_cache, g_cache, slot, h, j, i, c, tile_b, tile_v, tile_fk,
                            PREDECAYED, HEAD_GATE,
                        )  # fmt: skip
                k_f = k_view[row, h, tile_fk].to(torch.float32) * k_scale
                S = S + u[None, :, None] * k_f[None, None, :]
                state_out[slot, j, tile_v, tile_fk] = S.to(state_out.dtype)
        # 4. Other rows append at the cursor: d by every V tile; k and g by V tile 0 (k once per q/k
        #    head, by its first value head; predecayed: P_c = P_{c-1} + g and k e^{-P_c} per value head).
        if valid & ~flush:
            first_v = (hl.zeros([K], dtype=torch.int32) + tile_v.begin) == 0
            for tile_c in hl.tile(c, c + 1, block_size=1):  # the one position c, as a tile
                d_cache[slot, j, tile_c, tile_v] = u[None, None, :].to(d_cache.dtype)
                if PREDECAYED:
                    total = G + g[None, :]  # P_c, [1, K]
                    hl.store(g_cache, [slot, j, tile_c, keys], total[:, None, :], extra_mask=first_v[None, None, :])
                    hl.store(
                        k_cache, [slot, j, tile_c, keys],
                        (k[None, :] * torch.exp(-total))[:, None, :].to(k_cache.dtype),
                        extra_mask=first_v[None, None, :],
                    )  # fmt: skip
                else:
                    lane0 = first_v & (keys == 0)
                    hl.store(g_cache, [slot, j, tile_c, ch], g[None, None, :], extra_mask=lane0[None, None, :])
                    first = first_v & ((hl.zeros([K], dtype=torch.int32) + j) % HPQ == 0)
                    hl.store(
                        k_cache, [slot, h, tile_c, keys], k[None, None, :].to(k_cache.dtype),
                        extra_mask=first[None, None, :],
                    )  # fmt: skip
    return out


FusedArgs = args_record(fused_body)
