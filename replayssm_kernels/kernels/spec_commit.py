"""A speculative commit (``replayssm_ref.spec``), one program per (row, value head, V tile).

With ``c`` the row's cursor and ``n`` its accepted drafts, a row **folds** when the next window would
not fit (``c + n + T > L``) or when forced: its checkpoint becomes the state after the ``c + n``
committed entries, applied in the recurrence's order, ``S <- S diag(e^gamma) + d kappa^T``, ``FK``
channels of K at a time (entry ``c + m`` of a tree read where the verify put the m-th accepted draft,
so nothing is moved first). Otherwise a tree's accepted entries move to ``c .. c + n - 1`` (each
source at or past its destination, in path order; ``d`` by every program of the row and head, ``g``
by its first V tile, ``k`` by the first value head of its q/k group too). The cursors are the next
launch's (``kernels.spec_cursor``): this one reads them.
"""

from __future__ import annotations

import helion.language as hl
import torch

from .common import args_record
from .spec_weights import spec_row


def spec_commit_body(
    initial_state: torch.Tensor,  # [slots, HV, V, K], folded rows written
    d_cache: torch.Tensor,  # [slots, HV, L, V]
    k_cache: torch.Tensor,  # [slots, H, L, K]
    g_cache: torch.Tensor,  # [slots, HV, L, K]
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32, read
    num_accepted: torch.Tensor,  # [B] int32
    accepted_nodes: torch.Tensor | None,  # [B, T] int32   (TREE)
    force_flush: torch.Tensor | None,  # [B] int32
    num_slots: int,
    T: hl.constexpr,
    HPQ: hl.constexpr,
    FK: hl.constexpr,  # K channels per step of a fold
    TREE: hl.constexpr,  # accepted_nodes given
    HAS_FORCE: hl.constexpr,
) -> torch.Tensor:
    B = write_pos.size(0)
    HV = d_cache.size(1)
    V = hl.specialize(d_cache.size(3))
    K = hl.specialize(g_cache.size(3))
    L = hl.specialize(d_cache.size(2))
    block_v = hl.register_block_size(V)
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        row = tile_b.begin
        j = tile_j.begin
        h = j // HPQ
        valid, slot, c = spec_row(ssm_state_indices, write_pos, num_slots, row, tile_b, L, T)
        n = hl.load(num_accepted, [row])
        valid = valid & (n >= 0) & (n <= T)
        n = torch.where(valid, n, n * 0)
        fold = c + n + T > L
        if HAS_FORCE:
            fold = fold | (hl.load(force_flush, [row]) != 0)
        if valid & fold:
            for tile_fk in hl.tile(K, block_size=FK):
                S = initial_state[slot, j, tile_v, tile_fk].sum(0).to(torch.float32)  # [BV, FK]
                for tile_m in hl.tile(0, c + n, block_size=1):  # the committed entries, oldest first
                    pos = tile_m.index  # [1]
                    if TREE:  # entry c + m is the m-th accepted draft's, at c + its node
                        node = hl.load(accepted_nodes, [tile_b, tile_m.index - c], extra_mask=tile_m.index >= c)
                        pos = torch.where(tile_m.index >= c, c + node.sum(0).to(torch.int32), pos)
                    gamma = hl.load(g_cache, [slot, j, pos, tile_fk]).sum(0).sum(0).to(torch.float32)  # [FK]
                    kappa = hl.load(k_cache, [slot, h, pos, tile_fk]).sum(0).sum(0).to(torch.float32)
                    d = hl.load(d_cache, [slot, j, pos, tile_v]).sum(0).sum(0).to(torch.float32)  # [BV]
                    S = S * torch.exp(gamma)[None, :] + d[:, None] * kappa[None, :]
                initial_state[slot, j, tile_v, tile_fk] = S[None, :, :].to(initial_state.dtype)
        if TREE:
            if valid & ~fold:
                head_first = tile_v.begin == 0
                group_first = (j % HPQ == 0) & head_first
                for tile_m in hl.tile(0, n, block_size=1):  # path order: sources never overwritten first
                    node = hl.load(accepted_nodes, [tile_b, tile_m.index]).sum(0).to(torch.int32)  # [1]
                    src = c + node
                    dst = c + tile_m.index
                    hl.store(d_cache, [slot, j, dst, tile_v], hl.load(d_cache, [slot, j, src, tile_v]))
                    if head_first:
                        chans = hl.arange(K)
                        hl.store(g_cache, [slot, j, dst, chans], hl.load(g_cache, [slot, j, src, chans]))
                    if group_first:
                        chans = hl.arange(K)
                        hl.store(k_cache, [slot, h, dst, chans], hl.load(k_cache, [slot, h, src, chans]))
    return initial_state


SpecCommitArgs = args_record(spec_commit_body)
