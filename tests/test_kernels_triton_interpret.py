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
        ("two_walk", "bf16_gate"),
    ],  # fmt: skip
)
def test_generated_code_of_each_ring_format(design, ring_format):
    """Predecayed keys through the walked flush, own tiles and launch 1's weights; a bf16 gate ring."""
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


@pytest.mark.parametrize("design", ["two_walk", "two_tiles", "split_programs"])
def test_generated_gdn_code(design):
    """Gated DeltaNet's per-head gate: the gate read by every channel through a repeated index (launch 1,
    a walked flush, own tiles) and stored by channel 0, GQA 2."""
    p = Problem(3, 1, 2, 16, 32, 4)
    check_sequence(p, design_fn(design, "gdn"), steps=5, p_force=0.3, seed=2, warm=True, gate="gdn")


def test_generated_gdn_code_treats_corrupted_rows_as_padding():
    check_corrupted_rows("split_overlap", Problem(4, 1, 2, 16, 16, 4), gate="gdn")


def test_generated_gdn_standard_code():
    p = Problem(3, 1, 2, 16, 16, 1)
    r = run_sequence(p, steps=3, replay_fn=helion_fused_recurrent_gdn_packed_decode, standard=True,
                     state_dtype=torch.float32, gate="gdn")  # fmt: skip
    assert not r.nonfinite and r.untouched_ok and r.max_rel <= tolerance(torch.float32, steps=3)
