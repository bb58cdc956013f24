"""Standard decode (KDA or GDN): read the state, update it with one token, write it back (one launch).

The kernel of ``helion_fused_recurrent_kda_packed_decode``, and of a ReplaySSM step at L = 1, where
every step flushes from an empty ring: the checkpoint is then the state. One program per (row, value
head, V tile) holds its ``[BV, K]`` state tile. Mirrors ``replayssm_ref.recurrence``.
"""

from __future__ import annotations

import helion.language as hl
import torch

from .common import args_record, gate_channel, token


def standard_body(
    q_view: torch.Tensor,  # [B, H, K]   views into mixed_qkv
    k_view: torch.Tensor,  # [B, H, K]
    v_view: torch.Tensor,  # [B, HV, V]
    a3: torch.Tensor,  # [B, HV, K]   (HEAD_GATE: [B, HV, 1])
    b: torch.Tensor,  # [B, HV]
    A_log: torch.Tensor,  # [HV]
    dt2: torch.Tensor,  # [HV, K]   (HEAD_GATE: [HV, 1])
    initial_state: torch.Tensor,  # [slots, HV, V, K], read and written
    out: torch.Tensor,  # [B, 1, HV, V]
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor | None,  # [B] int32 (ReplaySSM at L = 1: a row whose cursor is not 0 is padding)
    num_slots: int,  # slots outside [0, num_slots) are padding
    scale: float,
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HPQ: hl.constexpr,  # value heads per q/k head
    HAS_CURSOR: hl.constexpr,  # write_pos is given
    HEAD_GATE: hl.constexpr,  # Gated DeltaNet: one log decay per value head (common.gate_channel)
) -> torch.Tensor:
    B = q_view.size(0)
    K = hl.specialize(q_view.size(2))
    HV = v_view.size(1)
    V = hl.specialize(v_view.size(2))
    block_v = hl.register_block_size(V)
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        row = tile_b.begin
        j = tile_j.begin
        h = j // HPQ
        valid = ssm_state_indices[row] >= 0
        slot = ssm_state_indices[tile_b]
        if HAS_CURSOR:  # ReplaySSM at L = 1: a slot outside the pool or a cursor other than 0 is padding
            valid = valid & (ssm_state_indices[row] < num_slots) & (write_pos[row] == 0)
            slot = torch.where((slot >= 0) & (slot < num_slots), slot, slot * 0)
        else:  # the packed decode: the code of the measured baseline (a test of the pool bound cost 4%)
            slot = torch.where(slot >= 0, slot, slot * 0)
        if HEAD_GATE:  # the head's one gate value, read by every channel
            ch = gate_channel(hl.arange(K), HEAD_GATE)
            a_t, dt_t = hl.load(a3, [row, j, ch]), hl.load(dt2, [j, ch])
        else:
            a_t, dt_t = a3[row, j, :], dt2[j, :]
        q, k, g, beta = token(
            q_view[row, h, :], k_view[row, h, :], a_t, dt_t, A_log[j], b[row, j], scale, lower_bound, USE_L2NORM,
            BOUNDED,
        )  # fmt: skip
        v = v_view[row, j, tile_v].to(torch.float32)
        # the slot is a [1] vector (see common.row_setup): sum(0) drops its axis
        S = initial_state[slot, j, tile_v, :].sum(0).to(torch.float32) * torch.exp(g)[None, :]
        u = beta * (v - (S * k[None, :]).sum(1))
        S = S + u[:, None] * k[None, :]
        o = (S * q[None, :]).sum(1)
        out[row, 0, j, tile_v] = torch.where(valid, o, hl.zeros([tile_v], dtype=torch.float32)).to(out.dtype)
        if valid:
            initial_state[slot, j, tile_v, :] = S[None, :, :].to(initial_state.dtype)
    return out


StandardArgs = args_record(standard_body)
