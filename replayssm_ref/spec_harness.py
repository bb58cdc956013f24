"""Rounds of speculative decoding (verify + commit) against the float64 recurrence, for any
implementation with the reference's signatures (``replayssm_ref.spec``).

``run_spec_rounds`` keeps a float64 oracle state per slot that advances by single-token standard
decode steps over each round's accepted drafts only. Every round it re-poisons the ring at and past
each row's cursor with NaN (a verify may read none of it), checks the verify's outputs against the
float64 snapshot verify on the oracle state, checks that the verify wrote nothing but the drafts'
ring positions, commits a random accepted prefix (chain) or path (tree), and checks the cursor, the
committed state (checkpoint + ring, ``materialize_state``) and, after a fold, the checkpoint itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .cache import ReplaySSMCache
from .harness import Problem, head_errors, poison_stale, random_state, random_token, random_weights, same_bits
from .recurrence import recurrent_decode_step
from .replay import materialize_state
from .spec import chain_parents, recurrent_spec_verify, replayssm_spec_commit, replayssm_spec_verify


@dataclass
class SpecResult:
    rounds: int
    out_rel: float = 0.0  # worst verify output, per (row, draft, head), vs the float64 snapshot verify
    state_rel: float = 0.0  # worst committed state (and folded checkpoint) vs the float64 oracle
    folds: int = 0
    forced: int = 0
    accepted: int = 0  # drafts accepted over all rows and rounds
    nonfinite: bool = False
    untouched_ok: bool = True
    cursors_ok: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def max_rel(self) -> float:
        return max(self.out_rel, self.state_rel)

    def note(self, text: str) -> None:
        if len(self.problems) < 5:
            self.problems.append(text)


def random_tree(batch: int, num_drafts: int, gen: torch.Generator) -> torch.Tensor:
    """``parents [B, T]``: each draft's parent drawn from the drafts before it, or -1 (a root)."""
    parents = torch.empty(batch, num_drafts, dtype=torch.int32)
    for t in range(num_drafts):
        parents[:, t] = torch.randint(-1, t, (batch,), generator=gen) if t else -1
    return parents


def binary_tree(batch: int, num_drafts: int) -> torch.Tensor:
    """``parents [B, T]`` of a binary draft tree, level by level: two roots, each node two children."""
    t = torch.arange(num_drafts, dtype=torch.int32)
    return torch.where(t < 2, -1, (t - 2) // 2).expand(batch, num_drafts).contiguous()


def random_path(parents: torch.Tensor, gen: torch.Generator, num_drafts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(num_accepted [B], accepted_nodes [B, T])``: per row a path from a random root down random
    children, cut at a random length (0 included); unused entries are -1."""
    B, T = parents.shape
    nodes = torch.full((B, T), -1, dtype=torch.int32)
    n = torch.zeros(B, dtype=torch.int32)
    for row in range(B):
        want = int(torch.randint(0, T + 1, (1,), generator=gen))
        prev, path = -1, []
        while len(path) < want:
            children = (parents[row] == prev).nonzero().squeeze(1)
            if children.numel() == 0:
                break
            prev = int(children[torch.randint(0, children.numel(), (1,), generator=gen)])
            path.append(prev)
        nodes[row, : len(path)] = torch.tensor(path, dtype=torch.int32)
        n[row] = len(path)
    return n, nodes


def run_spec_rounds(
    p: Problem,
    *,
    num_drafts: int,
    rounds: int,
    tree: bool = False,
    seed: int = 0,
    verify_fn: Callable = replayssm_spec_verify,
    commit_fn: Callable = replayssm_spec_commit,
    state_dtype: torch.dtype = torch.float64,
    cache_dtype: torch.dtype | None = None,
    p_force: float = 0.1,
    p_pad: float = 0.1,
    lower_bound: float | None = None,
    device: str | torch.device = "cpu",
) -> SpecResult:
    """``rounds`` rounds of verify + commit with random drafts, trees (``tree``: a random tree per row;
    else a chain) and accepted paths, padded rows and forced flushes, against the float64 oracle."""
    gen = torch.Generator().manual_seed(seed)
    hi, T, L = torch.float64, num_drafts, p.cache_length
    low = state_dtype is not hi
    in_dtype = torch.float32 if low else hi
    slots = torch.randperm(p.num_slots, generator=gen)[: p.batch]
    w = random_weights(p, gen, device, in_dtype)
    S = random_state(p, torch.Generator().manual_seed(seed + 1), slots, device, state_dtype)
    S_ref = S.to(hi, copy=True)
    cache = ReplaySSMCache.allocate(
        num_slots=p.num_slots, batch=p.batch, num_q_heads=p.num_q_heads, num_v_heads=p.num_v_heads,
        key_dim=p.key_dim, value_dim=p.value_dim, cache_length=L, cache_dtype=cache_dtype or state_dtype, device=device,
    )  # fmt: skip
    rings = (cache.d_cache, cache.k_cache, cache.g_cache)
    res = SpecResult(rounds)
    slots_dev = slots.to(device=device, dtype=torch.int32)
    for _ in range(rounds):
        drafts = [random_token(p, gen, device, in_dtype) for _ in range(T)]
        mixed, a, b = (torch.stack([d[i] for d in drafts], dim=1) for i in range(3))
        pad = torch.rand(p.batch, generator=gen) < p_pad
        idx = torch.where(pad, torch.full_like(slots, -1), slots).to(device=device, dtype=torch.int32)
        valid = idx >= 0
        parents = random_tree(p.batch, T, gen) if tree else chain_parents(p.batch, T)
        parents = parents.to(device)

        # the verify, against the float64 snapshot verify on the oracle state
        out_ref = torch.empty(p.batch, T, p.num_v_heads, p.value_dim, dtype=hi, device=device)
        snaps = torch.empty(p.batch, T, p.num_v_heads, p.value_dim, p.key_dim, dtype=hi, device=device)
        recurrent_spec_verify(mixed.to(hi), a.to(hi), b.to(hi), w.A_log.to(hi), w.dt_bias.to(hi), w.scale, S_ref,
                              out_ref, idx, snaps, parents, True, lower_bound)  # fmt: skip
        poison_stale(cache, slots_dev)
        c = cache.write_pos.clone()
        before = [t.clone() for t in (S, *rings)]
        out = torch.full(out_ref.shape, float("nan"), dtype=in_dtype, device=device)
        verify_fn(mixed, a, b, w.A_log, w.dt_bias, w.scale, S, *rings, out, idx, cache.write_pos, parents, True,
                  lower_bound)  # fmt: skip
        res.nonfinite |= not bool(torch.isfinite(out[valid]).all())
        if not bool((out[~valid] == 0).all()):
            res.untouched_ok = False
            res.note("a padding row's output is not zero")
        rel, _ = head_errors(out[valid].flatten(0, 1), out_ref[valid].flatten(0, 1))
        res.out_rel = max(res.out_rel, rel)
        _check_verify_writes(res, p, T, idx, c, before, (S, *rings))

        # the commit of a random accepted prefix or path; the oracle takes those tokens one by one
        n, nodes = random_path(parents.cpu(), gen, T)
        n = torch.where(pad, torch.zeros_like(n), n)
        force = ((torch.rand(p.batch, generator=gen) < p_force) & ~pad).to(torch.int32)
        n_dev, nodes_dev, force_dev = n.to(device), nodes.to(device), force.to(device)
        commit_fn(S, *rings, idx, cache.write_pos, n_dev, nodes_dev if tree else None, force_dev, num_drafts=T)
        for j in range(T):
            take = valid.cpu() & (n > j)
            if not take.any():
                continue
            node = nodes[:, j].clamp(min=0).long() if tree else torch.full((p.batch,), j)
            step_idx = torch.where(take.to(device), idx, torch.full_like(idx, -1))
            rr = torch.arange(p.batch)
            one = [x[rr, node].to(device, hi) for x in (mixed, a, b)]
            o = torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, dtype=hi, device=device)
            recurrent_decode_step(*one, w.A_log.to(hi), w.dt_bias.to(hi), w.scale, S_ref, o, step_idx, True,
                                  lower_bound)  # fmt: skip
        res.accepted += int(n.sum())
        _check_commit(res, c, n, force, valid, cache.write_pos, T, L, S, rings, S_ref, slots_dev, before[0])
    return res


def _check_verify_writes(res, p, T, idx, c, before, after) -> None:
    """A verify writes the drafts' ring positions ``c .. c + T - 1`` of valid rows, nothing else."""
    S_b, *rings_b = before
    S_a, *rings_a = after
    if not same_bits(S_a, S_b):
        res.untouched_ok = False
        res.note("verify wrote a checkpoint")
    L = p.cache_length
    written = torch.zeros(S_b.shape[0], L, dtype=torch.bool, device=S_b.device)
    valid = idx >= 0
    for t in range(T):
        written[idx[valid].long(), c[valid].long() + t] = True
    for name, b_, a_ in zip(("d_cache", "k_cache", "g_cache"), rings_b, rings_a, strict=True):
        keep = ~written[:, None, :, None].expand_as(b_)
        if not same_bits(a_[keep], b_[keep]):
            res.untouched_ok = False
            res.note(f"verify: {name} changed outside the drafts' positions")
        res.nonfinite |= not bool(torch.isfinite(a_[~keep]).all())


def _check_commit(res, c, n, force, valid, write_pos, T, L, S, rings, S_ref, slots, S_before) -> None:
    """The cursor the contract gives, the committed state, a fold's checkpoint, untouched slots."""
    valid, c = valid.cpu(), c.cpu().long()
    moved = c + n.long()
    fold = valid & ((moved + T > L) | (force != 0))
    want = torch.where(fold, torch.zeros_like(moved), torch.where(valid, moved, c))
    res.folds += int((fold & (force == 0)).sum())
    res.forced += int((fold & (force != 0)).sum())
    if not torch.equal(write_pos.cpu().long(), want):
        res.cursors_ok = False
        res.note(f"commit left write_pos {write_pos.cpu().tolist()}, the contract gives {want.tolist()}")
    S_true = materialize_state(S, *rings, slots, write_pos)
    rel, _ = head_errors(S_true, S_ref[slots.long()])
    res.state_rel = max(res.state_rel, rel)
    folded = slots[fold.to(slots.device)].long()
    if folded.numel():
        rel, _ = head_errors(S[folded], S_ref[folded])
        res.state_rel = max(res.state_rel, rel)
        res.nonfinite |= not bool(torch.isfinite(S[folded]).all())
    untouched = torch.ones(S.shape[0], dtype=torch.bool, device=S.device)
    untouched[folded] = False
    if not same_bits(S[untouched], S_before[untouched]):
        res.untouched_ok = False
        res.note("commit wrote a checkpoint it must not")
