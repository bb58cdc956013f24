"""Launch 3 of a three-launch ReplaySSM step over the flushing rows only (kernel option
``flush_programs``): ``P`` programs share the work items (flush row, value head, V tile) of the step,
item ``t`` going to program ``t % P``.

Which rows flush is a device value, so the grid cannot be sized by it (a step stays one CUDA graph),
and a grid over every row spends most programs on rows that do nothing. Here each program ranks the
flushing rows itself (a cumsum over the batch's ``BB`` flags), and the r-th flushing row is the number
of rows whose running count is at most r. An item flushes by ring tiles (a dot per tile), with its
own weights (a reverse scan of gamma per tile) or, with ``HAND_W``, launch 1's.

With ``OWN`` (``flush_overlap``) an item first does what the state launch does for a row (``S_pre q``,
``S_pre k``, ``u`` and the output), the state launch skips flush rows, and the two launches touch
disjoint data, so ``plan.run_launches`` runs them at once on two streams.
"""

from __future__ import annotations

import helion.language as hl
import torch

from .common import args_record, flush_weight, handed_tile, l2_scale, own_tile

# Every program holds the whole batch's flush flags (a [BB] tile and its cumsum); past this batch a
# three-launch step uses the per-row flush launch.
MAX_BATCH = 4096


def flush_rows_body(
    k_view: torch.Tensor,  # [B, H, K]
    a3: torch.Tensor,  # [B, HV, K]   (HEAD_GATE: [B, HV, 1])
    A_log: torch.Tensor,  # [HV]
    dt2: torch.Tensor,  # [HV, K]   (HEAD_GATE: [HV, 1])
    initial_state: torch.Tensor,  # [slots, HV, V, K], read and written
    d_cache: torch.Tensor,  # [slots, HV, L, V]
    k_cache: torch.Tensor,  # [slots, H, L, K]   (PREDECAYED: [slots, HV, L, K])
    g_cache: torch.Tensor | None,  # [slots, HV, L, K]   (None: PREDECAYED; HEAD_GATE: [slots, HV, L, 1])
    decay: torch.Tensor,  # [B, HV, K] from launch 1: e^Gamma alpha
    w_ring: torch.Tensor | None,  # [B, HV, L, K] from launch 1   (HAND_W)
    u_buf: torch.Tensor | None,  # [B, HV, V] fp32 from the state launch   (not OWN)
    v_view: torch.Tensor,  # [B, HV, V]
    b: torch.Tensor,  # [B, HV]
    coef: torch.Tensor,  # [B, HV, 2, L] from launch 1
    xs: torch.Tensor,  # [B, HV, 2, K] from launch 1
    qk: torch.Tensor,  # [B, HV] from launch 1
    out: torch.Tensor,  # [B, 1, HV, V]
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32
    force_flush: torch.Tensor | None,  # [B] int32
    num_slots: int,
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HAS_FORCE: hl.constexpr,
    HPQ: hl.constexpr,
    FK: hl.constexpr,  # K channels per step
    FW: hl.constexpr,  # ring positions per tile (DOT_MIN or more)
    BV: hl.constexpr,  # V channels per work item
    BB: hl.constexpr,  # the batch rounded up to a power of two
    LB: hl.constexpr,  # the ring rounded up to a power of two (OWN: the d tile of S_pre x)
    OWN: hl.constexpr,  # flush rows' u and output too (the state launch skipped them)
    HAND_W: hl.constexpr,  # launch 1's ring weights instead of a reverse scan per tile
    P: hl.constexpr,  # programs (the grid): the kernel option flush_programs
    PREDECAYED: hl.constexpr,  # the predecayed ring format: keys per value head, no gate read
    HEAD_GATE: hl.constexpr,  # Gated DeltaNet: one log decay per value head (common.gate_channel)
) -> torch.Tensor:
    B = write_pos.size(0)
    K = hl.specialize(k_view.size(2))
    HV = a3.size(1)
    V = hl.specialize(v_view.size(2))
    L = hl.specialize(d_cache.size(2))
    NV = (V + BV - 1) // BV
    NT = (L + FW - 1) // FW
    for tile_p in hl.tile(P, block_size=1):
        rows = hl.arange(BB)
        in_batch = rows < B
        index = hl.load(ssm_state_indices, [rows], extra_mask=in_batch)
        cursor = hl.load(write_pos, [rows], extra_mask=in_batch)
        valid = in_batch & (index >= 0) & (index < num_slots) & (cursor >= 0) & (cursor < L)
        flush = valid & (cursor == L - 1)
        if HAS_FORCE:
            flush = flush | (valid & (hl.load(force_flush, [rows], extra_mask=in_batch) != 0))
        count = hl.cumsum(flush.to(torch.int32), 0)  # [BB]: flushing rows up to and including each row
        items = flush.to(torch.int32).sum(0) * (HV * NV)
        for tile_t in hl.tile(0, (items - tile_p.begin + P - 1) // P, block_size=1):
            t = tile_p.begin + tile_t.begin * P
            r = t // (HV * NV)  # rank of the item's row among the flushing rows
            j = (t // NV) % HV
            h = j // HPQ
            row = (count[None, :] <= r).to(torch.int32).sum(1).to(torch.int32)  # [1]: a vector index
            slot = hl.load(ssm_state_indices, [row])
            c = hl.load(write_pos, [row])  # [1]
            cols = (t % NV) * BV + hl.arange(BV)
            in_v = cols < V
            if OWN:  # as the state launch's steps 1 and 2 (read before the checkpoint is rewritten)
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
            k_scale = l2_scale(k_full.sum(0), USE_L2NORM)
            for tile_fk in hl.tile(K, block_size=FK):
                S = hl.load(initial_state, [slot, j, cols, tile_fk], extra_mask=in_v[None, :, None])
                decay_t = decay[row, j, tile_fk]  # [1, FK]
                S = S.to(torch.float32) * decay_t[:, None, :]  # [1, BV, FK]: S0 e^Gamma alpha
                if HAND_W:
                    for tile_w in hl.tile(0, NT, block_size=1):  # positions >= c load nothing
                        w_pos = tile_w.begin * FW + hl.arange(FW)
                        w_live = w_pos[None, :] < c[:, None]  # [1, FW]
                        S = handed_tile(S, w_ring, d_cache, row, slot, j, w_pos, w_live, cols, in_v, tile_fk)
                else:
                    alpha_c = flush_weight(
                        decay_t, a3, dt2, A_log, row, j, tile_fk, lower_bound, BOUNDED, PREDECAYED, HEAD_GATE
                    )
                    newer = hl.zeros([1, tile_fk], dtype=torch.float32)  # sum of gamma over the newer tiles
                    for tile_w in hl.tile(0, NT, block_size=1):  # newest tile first
                        start = (NT - 1 - tile_w.begin) * FW
                        ring = start + hl.arange(FW)
                        live = ring[None, :] < c[:, None]  # [1, FW]
                        later = (ring[None, :] + 1 < c[:, None]) & (ring[None, :] + 1 < start + FW)
                        S, newer = own_tile(
                            S, newer, d_cache, k_cache, g_cache, slot, h, j, ring, live, later, cols, in_v, tile_fk,
                            alpha_c, PREDECAYED, HEAD_GATE,
                        )  # fmt: skip
                k_c = k_view[row, h, tile_fk].to(torch.float32) * k_scale  # [1, FK]
                S = S + u[:, :, None] * k_c[:, None, :]
                hl.store(
                    initial_state, [slot, j, cols, tile_fk], S.to(initial_state.dtype), extra_mask=in_v[None, :, None]
                )
    return out


FlushRowsArgs = args_record(flush_rows_body)
