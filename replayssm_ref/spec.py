"""Speculative decoding on ReplaySSM (KDA): verify drafts from checkpoint + ring, commit by cursor.

The contract is in ``docs/design.md`` ("Speculative decoding"). A verify runs ``T`` draft tokens per
row, as a chain or as a tree (``parents``), on the committed state rebuilt from checkpoint + ring; it
writes every draft's output and every draft's ring entry at position ``c + t`` and never the
checkpoint. A commit moves the accepted path's entries to ``c .. c + n - 1`` and the cursor to
``c + n``, or folds the committed history into the checkpoint when the next window would not fit.

The snapshot verify (``recurrent_spec_verify``) is the oracle and the baseline: the standard decode
run over the same drafts, each draft's post-token state written to a snapshot buffer, and its commit
copies the last accepted snapshot into the pool.
"""

from __future__ import annotations

import torch

from .gates import compute_dtype
from .recurrence import Token, prepare_token, valid_rows
from .replay import _gather_rings, reconstruct_state
from .validation import (
    DecodeShapes,
    validate_spec_commit_inputs,
    validate_spec_verify_inputs,
)


def chain_parents(batch: int, num_drafts: int, device=None) -> torch.Tensor:
    """``parents`` of a chain: draft ``t``'s parent is ``t - 1`` (the first's, the committed state)."""
    return (torch.arange(num_drafts, device=device, dtype=torch.int32) - 1).expand(batch, num_drafts).contiguous()


def _draft_tokens(mixed_qkv, b, A_log, scale, shapes: DecodeShapes, num_drafts, cd, l2norm, lower_bound):
    """One ``Token`` per draft (the decode step's unpacking of each draft's inputs)."""
    tokens = []
    for t in range(num_drafts):
        one = DecodeShapes(shapes.batch, shapes.num_q_heads, shapes.num_v_heads, shapes.key_dim, shapes.value_dim,
                           shapes.a[:, t], shapes.dt_bias)  # fmt: skip
        tokens.append(prepare_token(mixed_qkv[:, t], b[:, t], A_log, scale, one, cd, l2norm, lower_bound))
    return tokens


def _run_drafts(S_root: torch.Tensor, tokens: list[Token], rows: torch.Tensor, parents: torch.Tensor):
    """Each draft on its parent's post-token state (``S_root`` for a root); returns per draft
    ``(o, u, S_post)`` over ``rows`` ([R, HV, V], [R, HV, V], [R, HV, V, K])."""
    results = []
    for t, tok in enumerate(tokens):
        par = parents[rows, t].long()  # [R]; -1: the committed state
        S = S_root.clone()
        for p in range(t):  # take the parent's state where the parent is draft p
            hit = par == p
            if hit.any():
                S[hit] = results[p][2][hit]
        alpha = torch.exp(tok.g[rows])
        S = S * alpha[:, :, None, :]
        k, q = tok.k[rows], tok.q[rows]
        u = tok.beta[rows, :, None] * (tok.v[rows] - torch.einsum("rhvk,rhk->rhv", S, k))
        S = S + u[..., :, None] * k[..., None, :]
        results.append((torch.einsum("rhvk,rhk->rhv", S, q), u, S))
    return results


def replayssm_spec_verify(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    d_cache: torch.Tensor,
    k_cache: torch.Tensor,
    g_cache: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    write_pos: torch.Tensor,
    parents: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    check_values: bool | None = None,
) -> torch.Tensor:
    """Verify ``T`` drafts per row from checkpoint + ring; returns ``out [B, T, HV, V]``.

    Inputs per draft: ``mixed_qkv [B, T, 2HK + HV V]``, ``a [B, T, HV K]``, ``b [B, T, HV]``;
    ``parents [B, T]`` int32 (``-1``: the committed state; ``None``: a chain). Per non-padding row
    with cursor ``c``: draft ``t`` runs on its parent's post-token state, ``out[row, t]`` is its
    output, and its ring entry (``d = u``, ``k`` per q/k head, ``g``) goes to position ``c + t``.
    Needs ``c + T <= L``. The checkpoint and ``write_pos`` are not written.
    """
    spec = validate_spec_verify_inputs(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, parents,
        rings=(d_cache, k_cache, g_cache), write_pos=write_pos, lower_bound=lower_bound, check_values=check_values,
    )  # fmt: skip
    shapes, T = spec.step, spec.num_drafts
    parents = chain_parents(shapes.batch, T, mixed_qkv.device) if parents is None else parents
    cd = compute_dtype(mixed_qkv, initial_state)
    tokens = _draft_tokens(mixed_qkv, b, A_log, scale, shapes, T, cd, use_qk_l2norm_in_kernel, lower_bound)
    rows, slots = valid_rows(ssm_state_indices)
    c = write_pos[rows].long()

    S0, d, kappa, gamma = _gather_rings(initial_state, d_cache, k_cache, g_cache, slots, shapes.heads_per_q, cd)
    results = _run_drafts(reconstruct_state(S0, d, kappa, gamma, c), tokens, rows, parents)

    out.zero_()
    for t, (o, u, _) in enumerate(results):
        out[rows, t] = o.to(out.dtype)
        pos = c + t
        d_cache[slots, :, pos] = u.to(d_cache.dtype)
        g_cache[slots, :, pos] = tokens[t].g[rows].to(g_cache.dtype)
        k_cache[slots, :, pos] = tokens[t].k_qk[rows].to(k_cache.dtype)
    return out


def spec_fold(S: torch.Tensor, d: torch.Tensor, kappa: torch.Tensor, gamma: torch.Tensor, n: int) -> torch.Tensor:
    """The state after ``n`` ring entries, in the recurrence's order: ``S <- S diag(e^gamma_i) +
    d_i kappa_i^T``. One slot: ``S [HV, V, K]``, ``d [HV, L, V]``, ``kappa [HV, L, K]`` (expanded to value
    heads), ``gamma [HV, L, K]``, in the compute dtype."""
    for i in range(n):
        S = S * torch.exp(gamma[:, i])[:, None, :] + d[:, i, :, None] * kappa[:, i, None, :]
    return S


def replayssm_spec_commit(
    initial_state: torch.Tensor,
    d_cache: torch.Tensor,
    k_cache: torch.Tensor,
    g_cache: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    write_pos: torch.Tensor,
    num_accepted: torch.Tensor,
    accepted_nodes: torch.Tensor | None = None,
    force_flush: torch.Tensor | None = None,
    *,
    num_drafts: int,
    check_values: bool | None = None,
) -> torch.Tensor:
    """Commit the accepted drafts of the last verify; returns ``write_pos``, updated in place.

    Per non-padding row with cursor ``c`` and ``n = num_accepted[row]``: the entries of the accepted
    path (``accepted_nodes[row, :n]``, root side first; ``None``: drafts ``0..n-1``) move to positions
    ``c .. c + n - 1``; then, if ``c + n + num_drafts > L`` or ``force_flush[row] != 0``, the checkpoint
    becomes the state after all ``c + n`` entries (the recurrence's order) and ``write_pos`` 0, else
    ``write_pos = c + n``. ``n = 0`` without a forced flush changes nothing.
    """
    rings = (d_cache, k_cache, g_cache)
    L = validate_spec_commit_inputs(
        initial_state, rings, ssm_state_indices, write_pos, num_accepted, accepted_nodes, force_flush, num_drafts,
        check_values=check_values,
    )  # fmt: skip
    hpq = initial_state.shape[1] // k_cache.shape[1]
    cd = compute_dtype(initial_state)
    rows, slots = valid_rows(ssm_state_indices)
    for row, slot in zip(rows.tolist(), slots.tolist(), strict=True):
        c, n = int(write_pos[row]), int(num_accepted[row])
        if accepted_nodes is not None:  # increasing nodes: each source is at or past its destination
            for j in range(n):
                src = c + int(accepted_nodes[row, j])
                for ring in rings:
                    ring[slot, :, c + j] = ring[slot, :, src]
        c += n
        forced = force_flush is not None and int(force_flush[row]) != 0
        if c + num_drafts > L or forced:
            S0, d, kappa, gamma = _gather_rings(initial_state, *rings, torch.tensor([slot]), hpq, cd)
            initial_state[slot] = spec_fold(S0[0], d[0], kappa[0], gamma[0], c).to(initial_state.dtype)
            c = 0
        write_pos[row] = c
    return write_pos


def recurrent_spec_verify(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    snapshots: torch.Tensor,
    parents: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    check_values: bool | None = None,
) -> torch.Tensor:
    """The snapshot verify (oracle and baseline): the standard decode over the drafts, each draft's
    post-token state written to ``snapshots [B, T, HV, V, K]`` (the pool is not written); returns ``out``."""
    spec = validate_spec_verify_inputs(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, parents,
        snapshots=snapshots, lower_bound=lower_bound, check_values=check_values,
    )  # fmt: skip
    shapes, T = spec.step, spec.num_drafts
    parents = chain_parents(shapes.batch, T, mixed_qkv.device) if parents is None else parents
    cd = compute_dtype(mixed_qkv, initial_state)
    tokens = _draft_tokens(mixed_qkv, b, A_log, scale, shapes, T, cd, use_qk_l2norm_in_kernel, lower_bound)
    rows, slots = valid_rows(ssm_state_indices)
    results = _run_drafts(initial_state[slots].to(cd), tokens, rows, parents)
    out.zero_()
    for t, (o, _, S) in enumerate(results):
        out[rows, t] = o.to(out.dtype)
        snapshots[rows, t] = S.to(snapshots.dtype)
    return out


def recurrent_spec_commit(
    initial_state: torch.Tensor,
    snapshots: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    num_accepted: torch.Tensor,
    accepted_nodes: torch.Tensor | None = None,
) -> torch.Tensor:
    """The snapshot verify's commit: each row with ``n > 0`` accepted drafts takes the snapshot of its
    last accepted draft (``accepted_nodes[row, n - 1]``, or ``n - 1`` for a chain) as its state."""
    rows, slots = valid_rows(ssm_state_indices)
    n = num_accepted[rows].long()
    keep = n > 0
    rows, slots, n = rows[keep], slots[keep], n[keep]
    last = n - 1 if accepted_nodes is None else accepted_nodes[rows, n - 1].long()
    initial_state[slots] = snapshots[rows, last]
    return initial_state
