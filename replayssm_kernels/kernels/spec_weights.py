"""Launch 1 of a speculative verify (``replayssm_ref.spec``): the K side, one warp per (row, value head).

A draft ``t``'s state is the committed state ``S_c`` decayed along its path plus the path's deltas,
``S_t = S_c diag(e^{G_t}) + sum_{j in P(t)} u_j (e^{G_t - G_j} k_j)^T`` (``P(t)`` the drafts from a
root to ``t``, ``G_t`` the log decays summed along it), so the state side needs only ``S_c x`` for the
``2T`` vectors ``x = e^{G_t} q_t, e^{G_t} k_t`` and the ``T x T`` path scalars
``A[t, j] = (e^{G_t - G_j} k_j) . k_t`` (``j`` a strict ancestor of ``t``) and
``Bq[t, j] = (e^{G_t - G_j} k_j) . q_t`` (``j`` on ``t``'s path). ``S_c x`` itself is the decode's
``S0 (e^Gamma x) + sum_{i<c} d_i ((W_i kappa_i) . x)``: this launch walks the ring once, newest first,
for the ``2T`` coefficients per entry, and hands the state launch ``e^Gamma x``. It also appends every
draft's ``k`` and ``g`` at ring position ``c + t``. A chain is the tree whose parents are ``t - 1``.
"""

from __future__ import annotations

import helion.language as hl
import torch

from .common import args_record, gate, l2_scale


def spec_row(ssm_state_indices, write_pos, num_slots, row, tile_b, L, T):
    """``(valid, slot [1], c)`` of a verify's or commit's row: a row is valid when its slot is in the
    pool and its cursor leaves room for the window (``0 <= c`` and ``c + T <= L``); any other row writes
    nothing and reads its checkpoint at slot 0 (see ``common.row_setup``)."""
    index = hl.load(ssm_state_indices, [row])
    cursor = hl.load(write_pos, [row])
    valid = (index >= 0) & (index < num_slots) & (cursor >= 0) & (cursor + T <= L)
    slot = hl.load(ssm_state_indices, [tile_b])
    slot = torch.where((slot >= 0) & (slot < num_slots), slot, slot * 0)
    return valid, slot, torch.where(valid, cursor, cursor * 0)


def spec_weights_body(
    q_view: torch.Tensor,  # [B, T, H, K]   views into mixed_qkv
    k_view: torch.Tensor,  # [B, T, H, K]
    a4: torch.Tensor,  # [B, T, HV, K]
    A_log: torch.Tensor,  # [HV]
    dt2: torch.Tensor,  # [HV, K]
    parents: torch.Tensor,  # [B, T] int32
    k_cache: torch.Tensor,  # [slots, H, L, K], drafts' keys appended at c + t
    g_cache: torch.Tensor,  # [slots, HV, L, K], drafts' gates appended at c + t
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32
    coef: torch.Tensor,  # [B, HV, L, 2T] fp32, written: (W_i kappa_i) . x for the 2T vectors
    xs: torch.Tensor,  # [B, HV, 2T, K] fp32, written: e^Gamma x
    path: torch.Tensor,  # [B, HV, 2, T, T] fp32, written: A and Bq
    num_slots: int,
    scale: float,
    lower_bound: float,
    USE_L2NORM: hl.constexpr,
    BOUNDED: hl.constexpr,
    HPQ: hl.constexpr,  # value heads per q/k head
    T: hl.constexpr,  # drafts per row
    TP: hl.constexpr,  # T rounded up to a power of two (the draft axis of a tile; drafts >= T masked)
    CH: hl.constexpr,  # ring positions per unrolled chunk (divides L)
) -> torch.Tensor:
    B = q_view.size(0)
    K = hl.specialize(q_view.size(3))
    HV = a4.size(2)
    L = hl.specialize(g_cache.size(2))
    for tile_b, tile_j in hl.tile([B, HV], block_size=[1, 1]):
        row = tile_b.begin
        j = tile_j.begin
        h = j // HPQ
        valid, slot, c = spec_row(ssm_state_indices, write_pos, num_slots, row, tile_b, L, T)
        drafts = hl.arange(TP)
        real = drafts < T  # [TP]
        chans = hl.arange(K)
        real_k = real[:, None] & (chans[None, :] >= 0)  # [TP, K]
        q = hl.load(q_view, [row, drafts, h, chans], extra_mask=real_k).to(torch.float32)  # [TP, K]
        k = hl.load(k_view, [row, drafts, h, chans], extra_mask=real_k).to(torch.float32)
        q = q * (l2_scale(q, USE_L2NORM, rows=True) * scale)
        k = k * l2_scale(k, USE_L2NORM, rows=True)
        g = gate(hl.load(a4, [row, drafts, j, chans], extra_mask=real_k), hl.load(dt2, [j, chans])[None, :], A_log[j],
                 lower_bound, BOUNDED)  # fmt: skip
        par = hl.load(parents, [row, drafts], extra_mask=real)  # [TP]

        # G (log decay summed along each draft's path) and the ancestor masks, parents first
        G = hl.zeros([TP, K], dtype=torch.float32)
        anc = hl.zeros([TP, TP], dtype=torch.float32)  # anc[t, i] = 1: draft i on the path to t (t included)
        for t in hl.static_range(T):
            is_t = (drafts == t).to(torch.float32)  # [T]
            p_t = (par * (drafts == t).to(torch.int32)).sum(0)  # draft t's parent, -1 for a root
            from_p = (drafts == p_t).to(torch.float32)  # [T], zero for a root
            G_t = (G * from_p[:, None]).sum(0) + (g * is_t[:, None]).sum(0)  # [K]
            anc_t = (anc * from_p[:, None]).sum(0) + is_t  # [T]
            G = G + is_t[:, None] * G_t[None, :]
            anc = anc + is_t[:, None] * anc_t[None, :]
        eq = torch.exp(G) * q  # e^{G_t} q_t, [T, K]
        ek = torch.exp(G) * k

        # the ring, newest entry first: W_i = exp(sum of the gates of the newer entries)
        newer = hl.zeros([K], dtype=torch.float32)
        for tile_f in hl.tile((L - c) // CH, L // CH, block_size=1):
            for t2 in hl.static_range(CH):
                i = L - 1 - tile_f.begin * CH - t2
                live = (hl.zeros([1, K], dtype=torch.int32) + i) < c
                kappa = hl.load(k_cache, [slot, h, i, chans], extra_mask=live).to(torch.float32).sum(0)
                gamma = hl.load(g_cache, [slot, j, i, chans], extra_mask=live).to(torch.float32).sum(0)
                w = torch.exp(newer) * kappa  # W_i kappa_i, [K]
                hl.store(coef, [row, j, i, drafts], (eq * w[None, :]).sum(1), extra_mask=real)
                hl.store(coef, [row, j, i, drafts + T], (ek * w[None, :]).sum(1), extra_mask=real)
                newer = newer + gamma
        total = torch.exp(newer)  # e^Gamma
        hl.store(xs, [row, j, drafts, chans], eq * total[None, :], extra_mask=real_k)
        hl.store(xs, [row, j, drafts + T, chans], ek * total[None, :], extra_mask=real_k)

        # the path scalars, one ancestor column at a time
        for i2 in hl.static_range(T):
            is_i = (drafts == i2).to(torch.float32)
            on_path = (anc * is_i[None, :]).sum(1)  # [T]: draft i2 on the path to t
            strict = on_path * (1.0 - is_i)  # ... and not t itself: on the path to t's parent
            G_i = (G * is_i[:, None]).sum(0)
            k_i = (k * is_i[:, None]).sum(0)
            decayed = torch.exp(torch.where(on_path[:, None] > 0, G - G_i[None, :], G * 0)) * k_i[None, :]  # [T, K]
            hl.store(path, [row, j, 0, drafts, i2], strict * (decayed * k).sum(1), extra_mask=real)
            hl.store(path, [row, j, 1, drafts, i2], on_path * (decayed * q).sum(1), extra_mask=real)

        # every draft's k (once per q/k head, by its first value head) and g at c + t
        if valid:
            pos = c + drafts
            hl.store(g_cache, [slot, j, pos, chans], g[None, :, :].to(g_cache.dtype), extra_mask=real_k[None, :, :])
            first = ((hl.zeros([1, TP, K], dtype=torch.int32) + j) % HPQ == 0) & real_k[None, :, :]
            hl.store(k_cache, [slot, h, pos, chans], k[None, :, :].to(k_cache.dtype), extra_mask=first)
    return coef


SpecWeightsArgs = args_record(spec_weights_body)
