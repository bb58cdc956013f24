"""The snapshot verify (the baseline of ``replayssm_ref.spec.recurrent_spec_verify``; sglang's Helion
``kda_verify`` does the same): one program per (row, value head, V tile) runs the drafts in order on
its ``[BV, K]`` state tile, each on its parent's post-token state (a chain keeps it in registers; a
tree reads the parent's snapshot back), and writes every draft's output and post-token state to the
snapshot buffer. ``snapshot_commit_body`` then copies the last accepted draft's snapshot into the pool.
"""

from __future__ import annotations

import helion.language as hl
import torch

from .common import args_record, token


def snapshot_verify_body(
    q_view: torch.Tensor,  # [B, T, H, K]
    k_view: torch.Tensor,  # [B, T, H, K]
    v_view: torch.Tensor,  # [B, T, HV, V]
    a4: torch.Tensor,  # [B, T, HV, K]
    b: torch.Tensor,  # [B, T, HV]
    A_log: torch.Tensor,  # [HV]
    dt2: torch.Tensor,  # [HV, K]
    parents: torch.Tensor | None,  # [B, T] int32   (not CHAIN)
    initial_state: torch.Tensor,  # [slots, HV, V, K], read
    snapshots: torch.Tensor,  # [B, T, HV, V, K], written
    out: torch.Tensor,  # [B, T, HV, V]
    ssm_state_indices: torch.Tensor,  # [B]
    num_slots: int,
    scale: float,
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HPQ: hl.constexpr,
    T: hl.constexpr,
    CHAIN: hl.constexpr,  # parents is None: draft t's parent is t - 1
) -> torch.Tensor:
    B = q_view.size(0)
    K = hl.specialize(q_view.size(3))
    HV = v_view.size(2)
    V = hl.specialize(v_view.size(3))
    block_v = hl.register_block_size(V)
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        row = tile_b.begin
        j = tile_j.begin
        h = j // HPQ
        index = ssm_state_indices[row]
        valid = (index >= 0) & (index < num_slots)
        slot = ssm_state_indices[tile_b]
        slot = torch.where((slot >= 0) & (slot < num_slots), slot, slot * 0)
        S_root = initial_state[slot, j, tile_v, :].sum(0).to(torch.float32)  # [BV, K]
        S = S_root
        for t in hl.static_range(T):
            if not CHAIN:  # the parent's post-token state: the pool's for a root, else its snapshot
                p = hl.load(parents, [tile_b, t])  # [1]: as an index (see common.row_setup)
                snap = hl.load(snapshots, [tile_b, p.clamp(min=0), j, tile_v, hl.arange(K)], extra_mask=p >= 0)
                has_parent = hl.load(parents, [row, t]) >= 0  # a scalar, for the choice
                S = torch.where(has_parent, snap.sum(0).sum(0).to(torch.float32), S_root)
            q, k, g, beta = token(
                q_view[row, t, h, :], k_view[row, t, h, :], a4[row, t, j, :], dt2[j, :], A_log[j], b[row, t, j],
                scale, lower_bound, USE_L2NORM, BOUNDED,
            )  # fmt: skip
            v = v_view[row, t, j, tile_v].to(torch.float32)
            S = S * torch.exp(g)[None, :]
            u = beta * (v - (S * k[None, :]).sum(1))
            S = S + u[:, None] * k[None, :]
            o = (S * q[None, :]).sum(1)
            out[row, t, j, tile_v] = torch.where(valid, o, hl.zeros([tile_v], dtype=torch.float32)).to(out.dtype)
            if valid:
                snapshots[row, t, j, tile_v, :] = S.to(snapshots.dtype)
    return out


SnapshotVerifyArgs = args_record(snapshot_verify_body)


def snapshot_commit_body(
    initial_state: torch.Tensor,  # [slots, HV, V, K], written
    snapshots: torch.Tensor,  # [B, T, HV, V, K]
    ssm_state_indices: torch.Tensor,  # [B]
    num_accepted: torch.Tensor,  # [B] int32
    accepted_nodes: torch.Tensor | None,  # [B, T] int32   (TREE)
    num_slots: int,
    T: hl.constexpr,
    TREE: hl.constexpr,
) -> torch.Tensor:
    B = ssm_state_indices.size(0)
    HV = initial_state.size(1)
    V = hl.specialize(initial_state.size(2))
    K = hl.specialize(initial_state.size(3))
    block_v = hl.register_block_size(V)
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        row = tile_b.begin
        j = tile_j.begin
        index = ssm_state_indices[row]
        n = num_accepted[row]
        if (index >= 0) & (index < num_slots) & (n > 0) & (n <= T):
            last = hl.load(num_accepted, [tile_b]) - 1  # [1]
            if TREE:
                last = hl.load(accepted_nodes, [tile_b, last]).sum(0).to(torch.int32)
            snap = hl.load(snapshots, [tile_b, last, j, tile_v, hl.arange(K)])  # [1, 1, BV, K]
            slot = ssm_state_indices[tile_b]
            initial_state[slot, j, tile_v, :] = snap.sum(0).to(initial_state.dtype)
    return initial_state


SnapshotCommitArgs = args_record(snapshot_commit_body)
