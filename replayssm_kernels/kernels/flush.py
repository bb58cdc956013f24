"""Launch 3 of a three-launch ReplaySSM step, per row: flush rows rewrite their checkpoint.

One program per (row, value head, V tile); programs of rows that do not flush exit at once. A flush
row takes its ``u`` from the state launch (``u_buf``) and rebuilds its post-token state ``S0 e^Gamma
alpha + sum_i d_i (W_i alpha kappa_i)^T + u k^T`` ``FK`` channels of K at a time, walking the ring
newest first. (``flush_rows`` is the other form of this launch: a fixed number of programs sharing
the flushing rows' work.)
"""

from __future__ import annotations

import helion.language as hl
import torch

from .common import args_record, flush_weight, l2_scale, row_setup, walk_entry


def flush_body(
    k_view: torch.Tensor,  # [B, H, K]
    a3: torch.Tensor,  # [B, HV, K]   (HEAD_GATE: [B, HV, 1])
    A_log: torch.Tensor,  # [HV]
    dt2: torch.Tensor,  # [HV, K]   (HEAD_GATE: [HV, 1])
    initial_state: torch.Tensor,  # [slots, HV, V, K], read and written
    d_cache: torch.Tensor,  # [slots, HV, L, V]
    k_cache: torch.Tensor,  # [slots, H, L, K]   (PREDECAYED: [slots, HV, L, K])
    g_cache: torch.Tensor | None,  # [slots, HV, L, K]   (None: PREDECAYED; HEAD_GATE: [slots, HV, L, 1])
    decay: torch.Tensor,  # [B, HV, K] from launch 1: e^Gamma alpha
    u_buf: torch.Tensor,  # [B, HV, V] fp32 from the state launch: flush rows' u
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32
    force_flush: torch.Tensor | None,  # [B] int32
    num_slots: int,
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HAS_FORCE: hl.constexpr,
    HPQ: hl.constexpr,
    CH: hl.constexpr,  # ring positions per unrolled chunk of the walk (divides L)
    FK: hl.constexpr,  # K channels per step
    PREDECAYED: hl.constexpr,  # the predecayed ring format: keys per value head, no gate read
    HEAD_GATE: hl.constexpr,  # Gated DeltaNet: one log decay per value head (common.gate_channel)
) -> torch.Tensor:
    B = k_view.size(0)
    K = hl.specialize(k_view.size(2))
    HV = u_buf.size(1)
    V = hl.specialize(u_buf.size(2))
    L = hl.specialize(d_cache.size(2))
    block_v = hl.register_block_size(V)
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        row = tile_b.begin
        j = tile_j.begin
        h = j // HPQ
        valid, slot, c, flush = row_setup(
            ssm_state_indices, write_pos, force_flush, num_slots, row, tile_b, L, HAS_FORCE
        )  # fmt: skip
        if valid & flush:
            u = u_buf[row, j, tile_v]
            k_scale = l2_scale(k_view[row, h, :].to(torch.float32), USE_L2NORM)
            for tile_fk in hl.tile(K, block_size=FK):
                S = initial_state[slot, j, tile_v, tile_fk].to(torch.float32)  # [1, BV, FK]
                k_c = k_view[row, h, tile_fk].to(torch.float32) * k_scale
                decay_t = decay[tile_b, j, tile_fk]
                S = S * decay_t[:, None, :]  # S0 e^Gamma alpha
                start = flush_weight(
                    decay_t, a3, dt2, A_log, row, j, tile_fk, lower_bound, BOUNDED, PREDECAYED, HEAD_GATE
                )
                w_alpha = hl.zeros([tile_b, tile_fk], dtype=torch.float32) + start  # W_i alpha
                for tile_f in hl.tile((L - c) // CH, L // CH, block_size=1):  # newest first (common.walk_entry)
                    for t in hl.static_range(CH):
                        i = L - 1 - tile_f.begin * CH - t
                        S, w_alpha = walk_entry(
                            S, w_alpha, d_cache, k_cache, g_cache, slot, h, j, i, c, tile_b, tile_v, tile_fk,
                            PREDECAYED, HEAD_GATE,
                        )  # fmt: skip
                S = S + u[None, :, None] * k_c[None, None, :]
                initial_state[slot, j, tile_v, tile_fk] = S.to(initial_state.dtype)
    return u_buf


FlushArgs = args_record(flush_body)
