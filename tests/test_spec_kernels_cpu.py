"""The speculative-decoding kernels against the float64 recurrence through Helion's interpreter
(HELION_INTERPRET=1; on a GPU, on the GPU): rounds of verify + commit (chains and trees, T = 1..8,
accept 0..T, cursors at the capacity edge, forced flushes with pending drafts, padding, stale NaNs,
untouched bytes; ``replayssm_ref.spec_harness``), and the snapshot baseline."""

from __future__ import annotations

import os

import pytest
import torch

from replayssm_kernels.spec import (
    helion_kda_replayssm_spec_commit,
    helion_kda_replayssm_spec_verify,
    helion_kda_snapshot_spec_commit,
    helion_kda_snapshot_spec_verify,
)
from replayssm_ref.harness import Problem, head_errors, random_state, random_token, random_weights, tolerance
from replayssm_ref.spec import recurrent_spec_commit, recurrent_spec_verify
from replayssm_ref.spec_harness import binary_tree, random_path, random_tree, run_spec_rounds

pytestmark = pytest.mark.skipif(
    os.environ.get("HELION_INTERPRET") != "1" and not torch.cuda.is_available(),
    reason="needs HELION_INTERPRET=1 (CPU) or a GPU",
)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def check_rounds(p, T, tree, rounds=6, state_dtype=torch.float32, cache_dtype=None, **kw):
    r = run_spec_rounds(
        p, num_drafts=T, rounds=rounds, tree=tree, seed=T * 7 + p.cache_length, p_force=0.3,
        verify_fn=helion_kda_replayssm_spec_verify, commit_fn=helion_kda_replayssm_spec_commit,
        state_dtype=state_dtype, cache_dtype=cache_dtype, device=DEVICE, **kw,
    )  # fmt: skip
    tol = tolerance(state_dtype, cache_dtype or state_dtype, steps=rounds * T)
    assert not r.nonfinite and r.untouched_ok and r.cursors_ok, r.problems
    assert r.max_rel <= tol, (r.out_rel, r.state_rel, tol)
    return r


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
@pytest.mark.parametrize(("T", "L"), [(1, 1), (2, 4), (4, 4), (3, 9), (8, 10)], ids=lambda x: str(x))
def test_rounds_match_float64(tree, T, L):
    """L = T: every round at the capacity edge; L > T: several rounds' drafts pile up before a fold;
    GQA 2 (keys shared by two value heads)."""
    r = check_rounds(Problem(3, 1, 2, 16, 32, L), T, tree)
    assert r.forced > 0 and r.accepted > 0


@pytest.mark.parametrize(("state", "ring"), [(torch.bfloat16, torch.bfloat16), (torch.float32, torch.bfloat16)])
def test_rounds_in_16_bits_and_the_bounded_gate(state, ring):
    check_rounds(Problem(3, 2, 2, 16, 16, 6), 3, True, state_dtype=state, cache_dtype=ring, lower_bound=-4.0)


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "binary-tree"])
def test_snapshot_baseline_matches_float64(tree):
    p, T = Problem(3, 1, 2, 16, 32, 8), 6
    gen = torch.Generator().manual_seed(2)
    w = random_weights(p, gen, DEVICE)
    drafts = [random_token(p, gen, DEVICE, torch.float32) for _ in range(T)]
    mixed, a, b = (torch.stack([d[i] for d in drafts], 1) for i in range(3))
    S = random_state(p, gen, torch.arange(3), DEVICE, torch.float32)
    idx = torch.tensor([0, -1, 2], dtype=torch.int32, device=DEVICE)
    parents = binary_tree(3, T).to(DEVICE) if tree else None
    out, out64 = torch.full((3, T, 2, 32), float("nan"), device=DEVICE), torch.empty(3, T, 2, 32).double()
    snaps, snaps64 = torch.zeros(3, T, 2, 32, 16, device=DEVICE), torch.zeros(3, T, 2, 32, 16).double()
    helion_kda_snapshot_spec_verify(mixed, a, b, w.A_log, w.dt_bias, w.scale, S, out, idx, snaps, parents, True)
    recurrent_spec_verify(mixed.double().cpu(), a.double().cpu(), b.double().cpu(), w.A_log.double().cpu(),
                          w.dt_bias.double().cpu(), w.scale, S.double().cpu(), out64, idx.cpu(), snaps64,
                          None if parents is None else parents.cpu(), True)  # fmt: skip
    valid = (idx >= 0).cpu()
    assert (out.cpu()[~valid] == 0).all()
    tol = tolerance(torch.float32, steps=T)
    assert head_errors(out.cpu()[valid].flatten(0, 1), out64[valid].flatten(0, 1))[0] <= tol
    assert head_errors(snaps.cpu()[valid].flatten(0, 1), snaps64[valid].flatten(0, 1))[0] <= tol
    path_parents = binary_tree(3, T) if tree else torch.arange(T, dtype=torch.int32).expand(3, T) - 1
    n, nodes = random_path(path_parents, gen, T)
    S64 = S.double().cpu()
    helion_kda_snapshot_spec_commit(S, snaps, idx, n.to(DEVICE), nodes.to(DEVICE) if tree else None)
    recurrent_spec_commit(S64, snaps64, idx.cpu(), n, nodes if tree else None)
    assert head_errors(S.cpu(), S64)[0] <= tol


def test_random_trees_over_rounds():
    """A new random tree per row and round (any shape, roots anywhere), accepted paths of any length."""
    assert random_tree(4, 8, torch.Generator().manual_seed(0)).min() == -1
    check_rounds(Problem(2, 1, 1, 16, 16, 12), 8, True, rounds=5)
