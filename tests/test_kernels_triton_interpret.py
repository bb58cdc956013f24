"""The generated Triton code of every design, run by Triton's CPU interpreter (TRITON_INTERPRET=1,
triton==3.9.0): catches codegen bugs that Helion's own interpreter cannot (masks, pointer arithmetic,
loop bounds as generated). Tiny shapes only: the interpreter is slow."""

from __future__ import annotations

import os

import pytest
import torch
from cases import DESIGNS, check_corrupted_rows, check_sequence, design_fn

from replayssm_kernels import helion_fused_recurrent_gdn_packed_decode, helion_fused_recurrent_kda_packed_decode
from replayssm_ref.harness import Problem, run_sequence, tolerance

pytestmark = [
    pytest.mark.triton_interpret,
    pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1"),
]


@pytest.mark.parametrize("design", [d for d in DESIGNS if d != "default"])
def test_generated_code_of_each_design(design):
    p = Problem(3, 1, 2, 16, 32, 4)  # two V tiles, two K chunks
    check_sequence(p, design_fn(design), steps=5, p_force=0.3, seed=2, warm=True)


@pytest.mark.parametrize(
    ("design", "ring_format"),
    [
        ("two_walk", "predecayed"),
        ("split_programs", "predecayed"),
        ("split_overlap", "predecayed"),
        ("fused", "predecayed"),
    ],  # fmt: skip
)
def test_generated_code_of_each_ring_format(design, ring_format):
    """Predecayed keys through the walked flush, own tiles, launch 1's weights and the one launch."""
    p = Problem(3, 1, 2, 16, 32, 4)
    check_sequence(
        p, design_fn(design), steps=5, p_force=0.3, seed=2, warm=True, lower_bound=-3.0, ring_format=ring_format
    )


@pytest.mark.parametrize("design", ["two_tiles", "split_overlap"])
def test_generated_code_with_a_ring_longer_than_a_tile(design):
    """L = 20: the state launch walks d in tiles, a flush takes two ring tiles."""
    p = Problem(2, 1, 1, 16, 16, 20)
    check_sequence(p, design_fn(design), steps=4, p_force=0.2, seed=0, warm=True)


@pytest.mark.parametrize("design", ["two_tiles", "split_overlap"])
def test_generated_code_treats_corrupted_rows_as_padding(design):
    """The generated pointer arithmetic, not only the eager body: a corrupted cursor or slot writes
    nowhere (it once wrote into another slot's rings)."""
    check_corrupted_rows(design, Problem(4, 1, 2, 16, 16, 4))


def test_generated_standard_code():
    p = Problem(3, 1, 2, 16, 16, 1)
    r = run_sequence(p, steps=3, replay_fn=helion_fused_recurrent_kda_packed_decode, standard=True,
                     state_dtype=torch.float32)  # fmt: skip
    assert not r.nonfinite and r.untouched_ok and r.max_rel <= tolerance(torch.float32, steps=3)


@pytest.mark.parametrize("design", ["two_walk", "two_tiles", "split_programs", "fused"])
def test_generated_gdn_code(design):
    """Gated DeltaNet's per-head gate: the gate read by every channel through a repeated index (launch 1,
    a walked flush, own tiles) and stored by channel 0, GQA 2."""
    p = Problem(3, 1, 2, 16, 32, 4)
    check_sequence(p, design_fn(design, "gdn"), steps=5, p_force=0.3, seed=2, warm=True, gate="gdn")


def test_generated_one_launch_gdn_code_with_a_ring_longer_than_a_tile():
    """L = 20: the one launch's ring tiles, each weighted by the gate sum over newer tiles."""
    p = Problem(2, 1, 2, 16, 16, 20)
    check_sequence(p, design_fn("fused", "gdn"), steps=4, p_force=0.2, seed=2, warm=True, gate="gdn")


def test_generated_gdn_code_treats_corrupted_rows_as_padding():
    check_corrupted_rows("split_overlap", Problem(4, 1, 2, 16, 16, 4), gate="gdn")


def test_generated_gdn_standard_code():
    p = Problem(3, 1, 2, 16, 16, 1)
    r = run_sequence(p, steps=3, replay_fn=helion_fused_recurrent_gdn_packed_decode, standard=True,
                     state_dtype=torch.float32, gate="gdn")  # fmt: skip
    assert not r.nonfinite and r.untouched_ok and r.max_rel <= tolerance(torch.float32, steps=3)


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
def test_generated_spec_verify_and_commit(tree):
    """The generated code of the speculative verify (both launches) and commit (fold, tree moves, cursors)."""
    from replayssm_kernels.spec import helion_kda_replayssm_spec_commit, helion_kda_replayssm_spec_verify
    from replayssm_ref.spec_harness import run_spec_rounds

    r = run_spec_rounds(  # T = 3: the draft axis padded to a power of two (a GPU compile once failed on it)
        Problem(2, 1, 2, 16, 16, 5), num_drafts=3, rounds=4, tree=tree, seed=3,
        verify_fn=helion_kda_replayssm_spec_verify, commit_fn=helion_kda_replayssm_spec_commit,
        state_dtype=torch.float32,
    )  # fmt: skip
    assert not r.nonfinite and r.untouched_ok and r.cursors_ok, r.problems
    assert r.max_rel <= tolerance(torch.float32, steps=12) and r.folds + r.forced > 0


def test_generated_snapshot_baseline():
    from replayssm_kernels.spec import helion_kda_snapshot_spec_verify
    from replayssm_ref.harness import head_errors, random_state, random_token, random_weights
    from replayssm_ref.spec import recurrent_spec_verify
    from replayssm_ref.spec_harness import binary_tree

    p, T = Problem(2, 1, 2, 16, 16, 4), 3
    gen = torch.Generator().manual_seed(0)
    w = random_weights(p, gen, "cpu")
    drafts = [random_token(p, gen, "cpu", torch.float32) for _ in range(T)]
    mixed, a, b = (torch.stack([d[i] for d in drafts], 1) for i in range(3))
    S = random_state(p, gen, torch.arange(2), "cpu", torch.float32)
    idx, parents = torch.tensor([1, 0], dtype=torch.int32), binary_tree(2, T)
    out, snaps = torch.empty(2, T, 2, 16), torch.empty(2, T, 2, 16, 16)
    out64, snaps64 = out.double(), snaps.double()
    helion_kda_snapshot_spec_verify(mixed, a, b, w.A_log, w.dt_bias, w.scale, S, out, idx, snaps, parents, True)
    recurrent_spec_verify(mixed.double(), a.double(), b.double(), w.A_log.double(), w.dt_bias.double(), w.scale,
                          S.double(), out64, idx, snaps64, parents, True)  # fmt: skip
    assert head_errors(out.flatten(0, 1), out64.flatten(0, 1))[0] <= tolerance(torch.float32, steps=T)
    assert head_errors(snaps.flatten(0, 1), snaps64.flatten(0, 1))[0] <= tolerance(torch.float32, steps=T)
