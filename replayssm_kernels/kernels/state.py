"""Launch 2 of a ReplaySSM step: the state side, one program per (row, value head, V tile).

With launch 1's vectors, ``S_pre x`` for x = q, k is the checkpoint tile's two mat-vecs plus one
``[c, BV]`` tile of the ring's ``d`` times 2c scalars. The program streams its checkpoint tile in
``[BV, KC]`` chunks through a loop pipelined ``k_stages`` deep; a ring of at most ``RING_TILE``
positions is loaded before that loop and reduced after it, so its loads and the checkpoint's are in
flight together (a longer ring is walked first). Then the output, and on non-flush rows the ``d``
append. Flush rows:

* ``FLUSH_HERE`` (two launches): the row rebuilds its post-token state and rewrites its checkpoint
  here, ``FK`` channels of K at a time (its tile re-read), by walking the ring or, with ``HAND_W``,
  by ring tiles of launch 1's weights (two loads and a dot per tile).
* otherwise (three launches) the flush launch writes the checkpoint: this launch hands it ``u``
  (``u_buf``), or with ``SKIP_FLUSH`` leaves the row wholly to it (output too), so that the two
  launches touch disjoint data and run at once.
"""

from __future__ import annotations

import helion.language as hl
import torch

from .common import DOT_MIN, args_record, flush_weight, handed_tile, l2_scale, row_setup, walk_entry

RING_TILE = 16  # a ring of at most this many positions is loaded as one tile beside the checkpoint


def state_body(
    k_view: torch.Tensor,  # [B, H, K]
    v_view: torch.Tensor,  # [B, HV, V]
    a3: torch.Tensor | None,  # [B, HV, K]   (FLUSH_HERE, walked; HEAD_GATE: [B, HV, 1])
    b: torch.Tensor,  # [B, HV]
    A_log: torch.Tensor | None,  # [HV]   (FLUSH_HERE, walked)
    dt2: torch.Tensor | None,  # [HV, K]   (FLUSH_HERE, walked; HEAD_GATE: [HV, 1])
    initial_state: torch.Tensor,  # [slots, HV, V, K], read
    # initial_state again, written by the flush: a second argument, so that Helion may pipeline the
    # flush's loop over K steps (it keeps a loop that reads and writes one argument unpipelined, for
    # triton#8259); a step writes only the tile it read
    state_out: torch.Tensor,
    d_cache: torch.Tensor,  # [slots, HV, L, V]
    k_cache: torch.Tensor | None,  # [slots, H or HV, L, K]   (FLUSH_HERE, walked)
    g_cache: torch.Tensor | None,  # [slots, HV, L, K]   (FLUSH_HERE, walked, not PREDECAYED; HEAD_GATE: [.., 1])
    coef: torch.Tensor,  # [B, HV, 2, L] from launch 1
    xs: torch.Tensor,  # [B, HV, 2, K] from launch 1
    qk: torch.Tensor,  # [B, HV] from launch 1
    decay: torch.Tensor | None,  # [B, HV, K] from launch 1   (FLUSH_HERE)
    w_ring: torch.Tensor | None,  # [B, HV, L, K] from launch 1   (HAND_W)
    u_buf: torch.Tensor | None,  # [B, HV, V] fp32, written: flush rows' u   (three launches, not SKIP_FLUSH)
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
    RB: hl.constexpr,  # ring positions per tile of d: one tile with RING_ONCE, else per loop iteration
    RING_ONCE: hl.constexpr,  # the ring fits one RB tile: load it beside the checkpoint, not in a loop first
    CH: hl.constexpr,  # ring positions per unrolled chunk of a walked flush (divides L)
    FK: hl.constexpr,  # K channels per step of the flush
    FW: hl.constexpr,  # ring positions per tile of a HAND_W flush (DOT_MIN or more)
    FLUSH_HERE: hl.constexpr,  # two launches: flush rows rewrite their checkpoint in this launch
    HAND_W: hl.constexpr,  # with FLUSH_HERE: flush by tiles of launch 1's ring weights
    SKIP_FLUSH: hl.constexpr,  # three launches: flush rows are wholly the flush launch's (flush_overlap)
    PREDECAYED: hl.constexpr,  # the predecayed ring format: a walked flush reads keys per value head, no gate
    HEAD_GATE: hl.constexpr,  # Gated DeltaNet: one log decay per value head (common.gate_channel)
) -> torch.Tensor:
    B = k_view.size(0)
    K = hl.specialize(k_view.size(2))
    HV = v_view.size(1)
    V = hl.specialize(v_view.size(2))
    L = hl.specialize(d_cache.size(2))
    block_v = hl.register_block_size(V)
    block_k = hl.register_block_size(K)  # the checkpoint's K chunk
    NT = (L + FW - 1) // FW  # ring tiles of a HAND_W flush
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        row = tile_b.begin
        j = tile_j.begin
        h = j // HPQ
        valid, slot, c, flush = row_setup(
            ssm_state_indices, write_pos, force_flush, num_slots, row, tile_b, L, HAS_FORCE
        )  # fmt: skip
        mine = ~(valid & flush) if SKIP_FLUSH else True
        if mine:
            beta = torch.sigmoid(b[row, j].to(torch.float32))
            v = v_view[row, j, tile_v].to(torch.float32)

            # 1. S_pre x for x = q, k: the ring's d times 2c scalars, and the checkpoint's two mat-vecs
            #    one [BV, KC] chunk at a time (positions >= c load nothing: stale entries never enter)
            acc_q = hl.zeros([tile_b, tile_v], dtype=torch.float32)
            acc_k = hl.zeros([tile_b, tile_v], dtype=torch.float32)
            if RING_ONCE:
                ring = hl.arange(RB)
                live = ring < c
                d_all = hl.load(d_cache, [slot, j, ring, tile_v], extra_mask=live[None, :, None])  # [1, RB, BV]
                coef_q = hl.load(coef, [tile_b, j, 0, ring], extra_mask=live[None, :])  # [1, RB]
                coef_k = hl.load(coef, [tile_b, j, 1, ring], extra_mask=live[None, :])
            else:
                for tile_i in hl.tile(0, c, block_size=RB):  # ends at c
                    d = d_cache[slot, j, tile_i, tile_v].to(torch.float32)  # [1, RB, BV]
                    acc_q = acc_q + (d * coef[tile_b, j, 0, tile_i][:, :, None]).sum(1)
                    acc_k = acc_k + (d * coef[tile_b, j, 1, tile_i][:, :, None]).sum(1)
            for tile_k in hl.tile(K, block_size=block_k):
                S0 = initial_state[slot, j, tile_v, tile_k].to(torch.float32)  # [1, BV, KC]
                acc_q = acc_q + (S0 * hl.load(xs, [tile_b, j, 0, tile_k]).unsqueeze(1)).sum(2)  # e^Gamma alpha q
                acc_k = acc_k + (S0 * hl.load(xs, [tile_b, j, 1, tile_k]).unsqueeze(1)).sum(2)
            if RING_ONCE:
                acc_q = acc_q + (d_all.to(torch.float32) * coef_q[:, :, None]).sum(1)
                acc_k = acc_k + (d_all.to(torch.float32) * coef_k[:, :, None]).sum(1)
            sq = acc_q.sum(0)  # [BV]
            sk = acc_k.sum(0)

            # 2. The current token.
            u = beta * (v - sk)
            o = sq + u * qk[row, j]
            out[row, 0, j, tile_v] = torch.where(valid, o, hl.zeros([tile_v], dtype=torch.float32)).to(out.dtype)

            if not FLUSH_HERE:
                if not SKIP_FLUSH:
                    if valid & flush:
                        u_buf[row, j, tile_v] = u
                # 4. Other rows append d = u at the cursor (launch 1 appended k and g).
                if valid & ~flush:
                    for tile_c in hl.tile(c, c + 1, block_size=1):
                        d_cache[slot, j, tile_c, tile_v] = u[None, None, :].to(d_cache.dtype)

        # 3. Flush rows rebuild the post-token state and rewrite the checkpoint, FK channels of K at a
        #    time (the tile re-read), so this rarely taken branch does not set every program's registers.
        if FLUSH_HERE:
            if valid & flush:
                k_scale = l2_scale(k_view[row, h, :].to(torch.float32), USE_L2NORM)
                for tile_fk in hl.tile(K, block_size=FK):
                    S = initial_state[slot, j, tile_v, tile_fk].to(torch.float32)  # [1, BV, FK]
                    k_c = k_view[row, h, tile_fk].to(torch.float32) * k_scale
                    decay_t = decay[tile_b, j, tile_fk]
                    S = S * decay_t[:, None, :]  # S0 e^Gamma alpha
                    if HAND_W:
                        for tile_w in hl.tile(0, NT, block_size=1):
                            w_pos = tile_w.begin * FW + hl.arange(FW)
                            w_live = w_pos[None, :] < c  # [1, FW]
                            S = handed_tile(S, w_ring, d_cache, tile_b, slot, j, w_pos, w_live, tile_v, None, tile_fk)
                    else:
                        start = flush_weight(
                            decay_t, a3, dt2, A_log, row, j, tile_fk, lower_bound, BOUNDED, PREDECAYED, HEAD_GATE
                        )  # fmt: skip
                        w_alpha = hl.zeros([tile_b, tile_fk], dtype=torch.float32) + start  # W_i alpha
                        for tile_f in hl.tile((L - c) // CH, L // CH, block_size=1):  # newest first (common.walk_entry)
                            for t in hl.static_range(CH):
                                i = L - 1 - tile_f.begin * CH - t
                                S, w_alpha = walk_entry(
                                    S, w_alpha, d_cache, k_cache, g_cache, slot, h, j, i, c, tile_b, tile_v,
                                    tile_fk, PREDECAYED, HEAD_GATE,
                                )  # fmt: skip
                    S = S + u[None, :, None] * k_c[None, None, :]
                    state_out[slot, j, tile_v, tile_fk] = S.to(state_out.dtype)
            # 4. Other rows append d = u at the cursor (launch 1 appended k and g).
            if valid & ~flush:
                for tile_c in hl.tile(c, c + 1, block_size=1):
                    d_cache[slot, j, tile_c, tile_v] = u[None, None, :].to(d_cache.dtype)
    return out


__all__ = ["DOT_MIN", "RING_TILE", "StateArgs", "state_body"]


StateArgs = args_record(state_body)
