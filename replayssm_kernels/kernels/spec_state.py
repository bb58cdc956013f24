"""Launch 2 of a speculative verify: the state side, one program per (row, value head, V tile).

With launch 1's vectors, ``S_c x`` for the ``2T`` vectors is the checkpoint tile's mat-vecs (the tile
read once, ``[BV, KC]`` chunks) plus the live ring's ``d`` times launch 1's coefficients. Then the
drafts in order: ``u_t = beta_t (v_t - S_c(e^{G_t} k_t) - sum_j A[t, j] u_j)`` over ``t``'s strict
ancestors, and ``o_t = S_c(e^{G_t} q_t) + sum_j Bq[t, j] u_j`` over its path (``kernels.spec_weights``).
Writes every draft's output and its ``d = u_t`` at ring position ``c + t``; never the checkpoint.
"""

from __future__ import annotations

import helion.language as hl
import torch

from .common import args_record
from .spec_weights import spec_row


def spec_state_body(
    v_view: torch.Tensor,  # [B, T, HV, V]
    b: torch.Tensor,  # [B, T, HV]
    initial_state: torch.Tensor,  # [slots, HV, V, K], read
    d_cache: torch.Tensor,  # [slots, HV, L, V], drafts' deltas appended at c + t
    coef: torch.Tensor,  # [B, HV, L, 2T] from launch 1
    xs: torch.Tensor,  # [B, HV, 2T, K] from launch 1
    path: torch.Tensor,  # [B, HV, 2, T, T] from launch 1
    out: torch.Tensor,  # [B, T, HV, V]
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32
    num_slots: int,
    T: hl.constexpr,
    TP: hl.constexpr,  # T rounded up to a power of two (drafts >= T masked)
    RB: hl.constexpr,  # ring positions per tile of d
) -> torch.Tensor:
    B = v_view.size(0)
    HV = v_view.size(2)
    V = hl.specialize(v_view.size(3))
    K = hl.specialize(initial_state.size(3))
    L = hl.specialize(d_cache.size(2))
    block_v = hl.register_block_size(V)
    block_k = hl.register_block_size(K)
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        row = tile_b.begin
        j = tile_j.begin
        valid, slot, c = spec_row(ssm_state_indices, write_pos, num_slots, row, tile_b, L, T)
        drafts = hl.arange(TP)
        real = drafts < T
        # S_c x for the 2T vectors: [TP, BV] for the q side and the k side
        acc_q = hl.zeros([TP, tile_v], dtype=torch.float32)
        acc_k = hl.zeros([TP, tile_v], dtype=torch.float32)
        for tile_i in hl.tile(0, c, block_size=RB):  # live entries only
            d = d_cache[slot, j, tile_i, tile_v].sum(0).to(torch.float32)  # [RB, BV]
            cq = hl.load(coef, [row, j, tile_i, drafts], extra_mask=real[None, :])  # [RB, TP]
            ck = hl.load(coef, [row, j, tile_i, drafts + T], extra_mask=real[None, :])
            acc_q = acc_q + (d[:, None, :] * cq[:, :, None]).sum(0)
            acc_k = acc_k + (d[:, None, :] * ck[:, :, None]).sum(0)
        for tile_k in hl.tile(K, block_size=block_k):
            S0 = initial_state[slot, j, tile_v, tile_k].sum(0).to(torch.float32)  # [BV, KC]
            xq = hl.load(xs, [row, j, drafts, tile_k], extra_mask=real[:, None])  # [TP, KC]
            xk = hl.load(xs, [row, j, drafts + T, tile_k], extra_mask=real[:, None])
            acc_q = acc_q + (S0[None, :, :] * xq[:, None, :]).sum(2)
            acc_k = acc_k + (S0[None, :, :] * xk[:, None, :]).sum(2)

        # the drafts in order (parents first): u_t from the deltas of t's strict ancestors
        beta = torch.sigmoid(hl.load(b, [row, drafts, j], extra_mask=real).to(torch.float32))  # [TP]
        v = hl.load(v_view, [row, drafts, j, tile_v.index], extra_mask=real[:, None]).to(torch.float32)  # [TP, BV]
        U = hl.zeros([TP, tile_v], dtype=torch.float32)
        o = hl.zeros([TP, tile_v], dtype=torch.float32)
        for t in hl.static_range(T):
            is_t = (drafts == t).to(torch.float32)[:, None]
            a_row = hl.load(path, [row, j, 0, t, drafts], extra_mask=real)  # [TP]: A[t, :]
            rest = (v - acc_k - (a_row[:, None] * U).sum(0)[None, :]) * beta[:, None]  # its row t is u_t
            U = U + is_t * rest
            q_row = hl.load(path, [row, j, 1, t, drafts], extra_mask=real)  # [TP]: Bq[t, :], t's path (t included)
            o = o + is_t * (acc_q + (q_row[:, None] * U).sum(0)[None, :])
        zero = hl.zeros([TP, tile_v], dtype=torch.float32)
        real_v = real[:, None] & (tile_v.index[None, :] < V)
        hl.store(out, [row, drafts, j, tile_v.index], torch.where(valid, o, zero).to(out.dtype), extra_mask=real_v)
        if valid:
            hl.store(d_cache, [slot, j, c + drafts, tile_v.index], U[None, :, :].to(d_cache.dtype),
                     extra_mask=real_v[None, :, :])  # fmt: skip
    return out


SpecStateArgs = args_record(spec_state_body)
