"""Launch 1 of a ReplaySSM step: everything on the K side, one warp per (row, value head).

The state enters a step only through ``S_pre x = S0 (e^Gamma alpha x) + sum_i d_i ((W_i alpha kappa_i)
. x)`` for x = q, k (normalised and scaled), so the K-side ring (``kappa``, ``gamma``) collapses to the
two K-vectors ``e^Gamma alpha x`` and 2c scalars per (row, head). Computing them here, once, leaves the
state launch a pair of mat-vecs with ready vectors: no ring work repeated per V tile, no norms, no
gate. Non-flush rows also append ``k`` and ``g`` here (``d`` comes from the state launch). With
``HAND_W``, flush rows also store their ring weights ``W_i alpha kappa_i`` for the flush.

``PREDECAYED`` (the ``predecayed`` ring format, ``replayssm_ref.formats``): the keys carry their
weights up to ``e^P``, ``P = P_{c-1}`` is the one gate entry read, and the append is ``P_c = P + g``
and ``k e^{-P_c}`` per value head.

``HEAD_GATE`` (Gated DeltaNet): the gate inputs and ring hold one value per head, read by every
channel (``common.gate_channel``); the append stores it once.
"""

from __future__ import annotations

import helion.language as hl
import torch

from .common import args_record, gate_channel, row_setup, token


def ring_weights_body(
    q_view: torch.Tensor,  # [B, H, K]
    k_view: torch.Tensor,  # [B, H, K]
    a3: torch.Tensor,  # [B, HV, K]   (HEAD_GATE: [B, HV, 1])
    b: torch.Tensor,  # [B, HV]
    A_log: torch.Tensor,  # [HV]
    dt2: torch.Tensor,  # [HV, K]   (HEAD_GATE: [HV, 1])
    k_cache: torch.Tensor,  # [slots, H, L, K]   (PREDECAYED: [slots, HV, L, K])
    g_cache: torch.Tensor,  # [slots, HV, L, K]   (PREDECAYED: prefix sums; HEAD_GATE: [slots, HV, L, 1])
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32
    force_flush: torch.Tensor | None,  # [B] int32
    coef: torch.Tensor,  # [B, HV, 2, L] fp32, written: (W_i alpha kappa_i) . q and . k
    xs: torch.Tensor,  # [B, HV, 2, K] fp32, written: e^Gamma alpha q and e^Gamma alpha k
    qk: torch.Tensor,  # [B, HV] fp32, written: q . k
    decay: torch.Tensor,  # [B, HV, K] fp32, written: e^Gamma alpha (for the flush)
    w_ring: torch.Tensor | None,  # [B, HV, L, K] fp32, written on flush rows (HAND_W): W_i alpha kappa_i
    num_slots: int,
    scale: float,
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HAS_FORCE: hl.constexpr,
    HPQ: hl.constexpr,  # value heads per q/k head
    CH: hl.constexpr,  # ring positions per unrolled chunk (divides L)
    HAND_W: hl.constexpr,  # store flush rows' ring weights (kernel option flush_weights)
    PREDECAYED: hl.constexpr,  # the predecayed ring format
    HEAD_GATE: hl.constexpr,  # Gated DeltaNet: one log decay per value head
) -> torch.Tensor:
    B = q_view.size(0)
    K = hl.specialize(q_view.size(2))
    HV = a3.size(1)
    L = hl.specialize(g_cache.size(2))
    # tiles are [1, 1, K] (row, head, channels): every reduction runs along K
    for tile_b, tile_j in hl.tile([B, HV], block_size=[1, 1]):
        row = tile_b.begin
        h = tile_j.index // HPQ  # [1]: the value head's q/k head
        valid, slot, c, flush = row_setup(
            ssm_state_indices, write_pos, force_flush, num_slots, row, tile_b, L, HAS_FORCE
        )  # fmt: skip
        ch = gate_channel(hl.arange(K), HEAD_GATE)  # the gate's channels (GDN: channel 0 for each)
        if HEAD_GATE:
            a_t, dt_t = hl.load(a3, [row, tile_j, ch]), hl.load(dt2, [tile_j, ch])
        else:
            a_t, dt_t = a3[row, tile_j, :], dt2[tile_j, :]
        q, k, g, _ = token(
            q_view[row, h, :], k_view[row, h, :], a_t, dt_t, A_log[tile_j][:, None], b[row, tile_j], scale,
            lower_bound, USE_L2NORM, BOUNDED, rows=True,
        )  # fmt: skip
        # Newest entry first, CH per unrolled chunk (so their loads issue together): the suffix sums
        # W_i = exp(sum_{i<m<c} gamma_m) accumulate forward, with no cancellation. Chunks start at the
        # one holding c - 1; positions >= c load nothing (stale, even NaN, entries never enter). The
        # loop is software-pipelined by the option prep_stages (a chunk's loads then go out ahead of
        # the previous chunk's stores).
        alpha = torch.exp(g)
        newer = hl.zeros([tile_b, tile_j, K], dtype=torch.float32)  # sum of gamma over the entries seen
        if PREDECAYED:  # newer = P_{c-1}, the only gate entry read (none on an empty ring)
            last = (hl.zeros([tile_b, tile_j, 1, K], dtype=torch.int32) + c) > 0
            for tile_p in hl.tile(c - 1, c, block_size=1):  # the one position c - 1, as a tile
                newer = hl.load(g_cache, [slot, tile_j, tile_p, hl.arange(K)], extra_mask=last).sum(2)
            weight = torch.exp(newer) * alpha[None, :, :]  # e^P alpha: every entry's weight, keys hold the rest
        for tile_f in hl.tile((L - c) // CH, L // CH, block_size=1):
            for t in hl.static_range(CH):
                i = L - 1 - tile_f.begin * CH - t
                live = (hl.zeros([tile_b, tile_j, K], dtype=torch.int32) + i) < c
                if PREDECAYED:
                    kappa = hl.load(k_cache, [slot, tile_j, i, hl.arange(K)], extra_mask=live).to(torch.float32)
                    m = weight * kappa
                else:
                    kappa = hl.load(k_cache, [slot, h, i, hl.arange(K)], extra_mask=live).to(torch.float32)
                    gamma = hl.load(g_cache, [slot, tile_j, i, ch], extra_mask=live).to(torch.float32)
                    m = torch.exp(newer) * kappa * alpha[None, :, :]  # W_i alpha kappa_i, [1, 1, K]
                hl.store(coef, [tile_b, tile_j, 0, i], (m * q[None, :, :]).sum(2))
                hl.store(coef, [tile_b, tile_j, 1, i], (m * k[None, :, :]).sum(2))
                if HAND_W:  # live positions of flush rows only (a bound of 0 on other rows: a
                    # scalar flag in the mask breaks TRITON_INTERPRET)
                    hand = (hl.zeros([tile_b, tile_j, K], dtype=torch.int32) + i) < torch.where(flush, c, c * 0)
                    hl.store(w_ring, [tile_b, tile_j, i, hl.arange(K)], m, extra_mask=hand)
                if not PREDECAYED:
                    newer = newer + gamma
        decay_alpha = torch.exp(newer + g[None, :, :])  # e^Gamma alpha: newer = Gamma now
        decay[tile_b, tile_j, :] = decay_alpha
        xs[tile_b, tile_j, 0, :] = decay_alpha * q[None, :, :]
        xs[tile_b, tile_j, 1, :] = decay_alpha * k[None, :, :]
        qk[tile_b, tile_j] = (q * k).sum(1)[None, :]
        # Non-flush rows append k and g at the cursor; k once per q/k head, by its first value head
        # (predecayed: P_c = P_{c-1} + g and k e^{-P_c}, per value head).
        if valid & ~flush:
            for tile_c in hl.tile(c, c + 1, block_size=1):  # the one position c, as a tile
                if PREDECAYED:
                    total = newer + g[None, :, :]  # P_c
                    g_cache[slot, tile_j, tile_c, :] = total[:, :, None, :]
                    k_cache[slot, tile_j, tile_c, :] = (k[None, :, :] * torch.exp(-total))[:, :, None, :].to(
                        k_cache.dtype
                    )
                else:
                    if HEAD_GATE:  # the head's one value, by channel 0
                        lane0 = (hl.zeros([tile_b, tile_j, 1, K], dtype=torch.int32) + hl.arange(K)) == 0
                        hl.store(g_cache, [slot, tile_j, tile_c, ch], g[None, :, None, :], extra_mask=lane0)
                    else:
                        g_cache[slot, tile_j, tile_c, :] = g[None, :, None, :].to(g_cache.dtype)
                    first = (hl.zeros([tile_b, tile_j, K], dtype=torch.int32) + tile_j.index[None, :, None]) % HPQ == 0
                    hl.store(
                        k_cache, [slot, h, tile_c, hl.arange(K)], k[None, :, None, :].to(k_cache.dtype),
                        extra_mask=first[:, :, None, :],
                    )  # fmt: skip
    return coef


RingWeightsArgs = args_record(ring_weights_body)
