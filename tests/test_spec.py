"""Speculative decoding in the reference: verify + commit equal single-token decode steps over the
accepted drafts (float64), for chains and trees, at the capacity edge, with forced flushes, padding,
stale NaNs and untouched bytes checked every round; and every validation error of the spec calls."""

from __future__ import annotations

import pytest
import torch

from replayssm_ref import ReplaySSMCache
from replayssm_ref.harness import Problem, random_state, random_token, random_weights, same_bits, tolerance
from replayssm_ref.spec import (
    chain_parents,
    recurrent_spec_commit,
    recurrent_spec_verify,
    replayssm_spec_commit,
    replayssm_spec_verify,
)
from replayssm_ref.spec_harness import binary_tree, random_path, random_tree, run_spec_rounds
from replayssm_ref.validation import check_accepted_path

F64 = torch.float64


def _check(r, tol=1e-12):
    assert not r.nonfinite and r.untouched_ok and r.cursors_ok, r.problems
    assert r.max_rel <= tol, (r.out_rel, r.state_rel)


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
@pytest.mark.parametrize("T", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("slack", [0, 1, 5], ids=["L=T", "L=T+1", "L=T+5"])
def test_rounds_equal_single_token_decode_in_float64(tree, T, slack):
    """L = T puts every round at the capacity edge (a fold each round); L = T + 1 and T + 5 let the
    ring hold several rounds' accepted drafts before it folds."""
    p = Problem(4, 2, 4, 8, 16, T + slack)
    r = run_spec_rounds(p, num_drafts=T, rounds=10, tree=tree, seed=T * 10 + slack)
    _check(r)
    assert r.accepted > 0 and r.forced > 0
    assert r.folds > 0 or slack == 5


@pytest.mark.parametrize("lower_bound", [None, -5.0], ids=["softplus", "bounded"])
def test_rounds_with_the_bounded_gate_and_lower_precision(lower_bound):
    p = Problem(3, 1, 2, 16, 16, 8)
    _check(run_spec_rounds(p, num_drafts=4, rounds=8, tree=True, seed=1, lower_bound=lower_bound))
    r = run_spec_rounds(p, num_drafts=4, rounds=8, seed=2, state_dtype=torch.float32, lower_bound=lower_bound)
    _check(r, tolerance(torch.float32, steps=32))


def _setup(p: Problem, T: int, seed=0):
    gen = torch.Generator().manual_seed(seed)
    w = random_weights(p, gen, "cpu", F64)
    drafts = [random_token(p, gen, "cpu", F64) for _ in range(T)]
    mixed, a, b = (torch.stack([d[i] for d in drafts], dim=1) for i in range(3))
    S = random_state(p, gen, torch.arange(p.batch), "cpu", F64)
    cache = ReplaySSMCache.allocate(num_slots=p.num_slots, batch=p.batch, num_q_heads=p.num_q_heads,
                                    num_v_heads=p.num_v_heads, key_dim=p.key_dim, value_dim=p.value_dim,
                                    cache_length=p.cache_length, cache_dtype=F64)  # fmt: skip
    out = torch.empty(p.batch, T, p.num_v_heads, p.value_dim, dtype=F64)
    idx = torch.arange(p.batch, dtype=torch.int32)
    return w, mixed, a, b, S, cache, out, idx


def test_chain_verify_is_the_snapshot_verify_and_accepting_all_is_T_steps():
    p, T = Problem(3, 2, 4, 8, 16, 6), 4
    w, mixed, a, b, S, cache, out, idx = _setup(p, T)
    snaps = torch.empty(3, T, 4, 16, 8, dtype=F64)
    out_snap = torch.empty_like(out)
    recurrent_spec_verify(mixed, a, b, w.A_log, w.dt_bias, w.scale, S, out_snap, idx, snaps, None, True)
    S0 = S.clone()
    replayssm_spec_verify(mixed, a, b, w.A_log, w.dt_bias, w.scale, S, cache.d_cache, cache.k_cache, cache.g_cache,
                          out, idx, cache.write_pos, None, True)  # fmt: skip
    torch.testing.assert_close(out, out_snap, rtol=1e-13, atol=1e-13)
    assert same_bits(S, S0) and (cache.write_pos == 0).all()  # verify writes no checkpoint, no cursor
    n = torch.full((3,), T, dtype=torch.int32)
    replayssm_spec_commit(S, cache.d_cache, cache.k_cache, cache.g_cache, idx, cache.write_pos, n, num_drafts=T)
    assert (cache.write_pos == 0).all()  # 0 + 4 accepted + a next window of 4 > L = 6: folded
    S_snap = S0.clone()
    recurrent_spec_commit(S_snap, snaps, idx, n)
    torch.testing.assert_close(S, S_snap, rtol=1e-13, atol=1e-13)


def test_zero_accepted_is_a_no_op_and_a_short_accept_moves_the_cursor_only():
    p, T = Problem(2, 1, 2, 8, 8, 8), 3
    w, mixed, a, b, S, cache, out, idx = _setup(p, T)
    rings = (cache.d_cache, cache.k_cache, cache.g_cache)
    replayssm_spec_verify(mixed, a, b, w.A_log, w.dt_bias, w.scale, S, *rings, out, idx, cache.write_pos, None, True)
    before = [t.clone() for t in (S, *rings, cache.write_pos)]
    replayssm_spec_commit(S, *rings, idx, cache.write_pos, torch.zeros(2, dtype=torch.int32), num_drafts=T)
    assert all(same_bits(x, y) for x, y in zip((S, *rings, cache.write_pos), before, strict=True))
    replayssm_spec_commit(S, *rings, idx, cache.write_pos, torch.tensor([2, 1], dtype=torch.int32), num_drafts=T)
    assert cache.write_pos.tolist() == [2, 1] and same_bits(S, before[0])  # a cursor move; no checkpoint write


def test_tree_commit_makes_the_accepted_path_contiguous():
    p, T = Problem(1, 1, 1, 8, 8, 16), 6
    w, mixed, a, b, S, cache, out, idx = _setup(p, T)
    rings = (cache.d_cache, cache.k_cache, cache.g_cache)
    parents = binary_tree(1, T)  # roots 0, 1; children 2, 3 of 0 and 4, 5 of 1
    assert parents.tolist() == [[-1, -1, 0, 0, 1, 1]]
    replayssm_spec_verify(mixed, a, b, w.A_log, w.dt_bias, w.scale, S, *rings, out, idx, cache.write_pos, parents,
                          True)  # fmt: skip
    entries = [r[0, :, [1, 5]].clone() for r in rings]  # the path 1 -> 5
    nodes = torch.tensor([[1, 5, -1, -1, -1, -1]], dtype=torch.int32)
    check_accepted_path(nodes, torch.tensor([2], dtype=torch.int32), parents)
    replayssm_spec_commit(S, *rings, idx, cache.write_pos, torch.tensor([2], dtype=torch.int32), nodes, num_drafts=T)
    assert cache.write_pos.tolist() == [2]  # 2 + 6 <= 16: no fold
    for ring, want in zip(rings, entries, strict=True):
        assert same_bits(ring[0, :, :2], want)


def test_random_paths_follow_their_trees():
    gen = torch.Generator().manual_seed(0)
    parents = random_tree(64, 8, gen)
    assert ((parents < torch.arange(8)) & (parents >= -1)).all()
    n, nodes = random_path(parents, gen, 8)
    check_accepted_path(nodes, n, parents)
    assert (n == 0).any() and (n > 1).any()
    with pytest.raises(ValueError, match=r"`accepted_nodes` must follow parents from a root"):
        check_accepted_path(torch.tensor([[1, 0]], dtype=torch.int32), torch.tensor([2], dtype=torch.int32),
                            torch.tensor([[-1, -1]], dtype=torch.int32))  # fmt: skip


def _verify_kwargs(T=3):
    p = Problem(3, 1, 2, 8, 8, 4)
    w, mixed, a, b, S, cache, out, idx = _setup(p, T)
    return {
        "mixed_qkv": mixed, "a": a, "b": b, "A_log": w.A_log, "dt_bias": w.dt_bias, "scale": w.scale,
        "initial_state": S, "d_cache": cache.d_cache, "k_cache": cache.k_cache, "g_cache": cache.g_cache,
        "out": out, "ssm_state_indices": idx, "write_pos": cache.write_pos, "parents": chain_parents(3, T),
    }  # fmt: skip


VERIFY_CASES = [
    ("parent-not-earlier", {"parents": torch.tensor([[-1, 0, 2]] * 3, dtype=torch.int32)},
     r"`parents` must name for every draft t a parent earlier than t .*got parents\[0, 2\] = 2"),
    ("parent-below-minus-one", {"parents": torch.tensor([[-1, -2, 0]] * 3, dtype=torch.int32)},
     r"parents\[0, 1\] = -2"),
    ("parents-dtype", {"parents": torch.zeros(3, 3, dtype=torch.int64)}, r"`parents` must be an int32 tensor of shape"),
    ("too-many-drafts", {"__T": 5}, r"`mixed_qkv` must hold at most L = 4 drafts per row .*T = 5"),
    ("cursor-at-edge", {"write_pos": torch.tensor([0, 2, 1], dtype=torch.int32)},
     r"`write_pos` must leave room for T = 3 drafts: write_pos \+ T <= L = 4; got \[2\] on rows \[1\]"),
    ("mixed-2d", {"mixed_qkv": torch.zeros(3, 64, dtype=F64)},
     r"`mixed_qkv` must have shape \[B, T, 2\*H\*K \+ HV\*V\]"),
    ("a-drafts", {"a": torch.zeros(3, 2, 16, dtype=F64)}, r"`a` must have shape \[B, T, \.\.\.\] = \[3, 3, \.\.\.\]"),
    ("out-shape", {"out": torch.zeros(3, 3, 2, 4, dtype=F64)}, r"`out` must have shape \[B, 1, HV, V\]"),
]  # fmt: skip


@pytest.mark.parametrize("change,pattern", [c[1:] for c in VERIFY_CASES], ids=[c[0] for c in VERIFY_CASES])
def test_verify_rejects(change, pattern):
    change = dict(change)
    kw = _verify_kwargs(T=change.pop("__T", 3)) | change
    before = {k: v.clone() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    with pytest.raises(ValueError, match=pattern):
        replayssm_spec_verify(**kw)
    for name, value in before.items():  # nothing written before validation passes
        assert same_bits(kw[name], value), name


def test_commit_rejects():
    kw = _verify_kwargs()
    rings = (kw["d_cache"], kw["k_cache"], kw["g_cache"])
    S, idx, wp = kw["initial_state"], kw["ssm_state_indices"], kw["write_pos"]
    with pytest.raises(ValueError, match=r"`num_accepted` must lie in \[0, T\] = \[0, 3\] .*got \[4\] on rows \[1\]"):
        replayssm_spec_commit(S, *rings, idx, wp, torch.tensor([0, 4, 1], dtype=torch.int32), num_drafts=3)
    with pytest.raises(ValueError, match=r"`num_drafts` must be at most L = 4"):
        replayssm_spec_commit(S, *rings, idx, wp, torch.zeros(3, dtype=torch.int32), num_drafts=5)
    with pytest.raises(ValueError, match=r"`accepted_nodes` must list row 0's accepted drafts .*increasing"):
        nodes = torch.tensor([[2, 1, -1]] * 3, dtype=torch.int32)
        replayssm_spec_commit(S, *rings, idx, wp, torch.tensor([2, 0, 0], dtype=torch.int32), nodes, num_drafts=3)
    with pytest.raises(ValueError, match=r"`num_accepted` must be an int32 tensor of shape \[B\] = \[3\]"):
        replayssm_spec_commit(S, *rings, idx, wp, torch.zeros(3, dtype=torch.int64), num_drafts=3)
