"""The generated Triton code of both kernels, run by Triton's CPU interpreter (TRITON_INTERPRET=1,
triton==3.9.0): catches codegen bugs that Helion's own interpreter cannot. Tiny shapes only."""

from __future__ import annotations

import functools
import os

import pytest
import torch

from replayssm_kernels import helion_fused_recurrent_kda_packed_decode, helion_fused_recurrent_kda_replayssm_decode
from replayssm_ref.harness import Problem, run_sequence

pytestmark = [
    pytest.mark.triton_interpret,
    pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1"),
]


@pytest.mark.parametrize("launches", [2, 3, 1], ids=["two_launch", "split", "fused"])
@pytest.mark.parametrize("precision", ["fast", "precise"])
@pytest.mark.parametrize(
    "p", [Problem(3, 1, 2, 16, 16, 1), Problem(3, 1, 2, 16, 16, 3), Problem(2, 2, 2, 16, 16, 4)], ids=Problem.label
)
def test_generated_replayssm_code(p, precision, launches):
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, precision=precision, launches=launches)
    r = run_sequence(p, steps=p.cache_length + 3, replay_fn=fn, state_dtype=torch.float32, p_force=0.3, seed=2)
    assert r.max_rel <= 1e-5 and not r.nonfinite and r.untouched_ok


@pytest.mark.parametrize("ring_prefetch", [0, 1], ids=["ring_loop", "ring_once"])
@pytest.mark.parametrize("launches", [2, 3], ids=["two_launch", "split"])
def test_generated_state_code_in_K_chunks(launches, ring_prefetch):
    p = Problem(2, 1, 2, 16, 16, 3)
    config = {"block_sizes": [8, 8], "num_warps": 1, "num_stages": 1, "k_stages": 2, "flush_block_k": 16}
    config["ring_prefetch"] = ring_prefetch
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=launches, config=config)
    r = run_sequence(p, steps=p.cache_length + 3, replay_fn=fn, state_dtype=torch.float32, p_force=0.3, seed=4)
    assert r.max_rel <= 1e-5 and not r.nonfinite and r.untouched_ok


@pytest.mark.parametrize(
    "launches, prep_stages", [(3, 0), (3, 3), (2, 3)], ids=["split", "split_pipelined", "two_launch_pipelined"]
)
def test_generated_ring_walk_in_chunks(launches, prep_stages):
    """Launch 1's and the flush's ring walk over several unrolled chunks, generated code; with
    ``prep_stages`` launch 1's loop over them is software-pipelined (its loads are then async copies
    through shared memory on a GPU)."""
    p = Problem(2, 1, 2, 16, 16, 4)
    config = {"block_sizes": [8, 16], "num_warps": 1, "num_stages": 1, "ring_chunk": 2, "prep_stages": prep_stages}
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=launches, config=config)
    r = run_sequence(p, steps=2 * p.cache_length + 2, replay_fn=fn, state_dtype=torch.float32, p_force=0.3, seed=5)
    assert r.max_rel <= 1e-5 and not r.nonfinite and r.untouched_ok


@pytest.mark.parametrize(
    ("launches", "programs", "overlap", "weights", "key_dim"),
    [
        (2, 0, 0, 0, 16), (2, 0, 0, 1, 16), (2, 0, 0, 1, 32), (3, 0, 0, 0, 16), (3, 3, 0, 0, 16), (3, 3, 1, 0, 16),
        (3, 3, 1, 1, 16), (3, 3, 1, 1, 32),
    ],
    ids=[
        "two_launch", "two_launch_handed_weights", "two_launch_two_k_steps_pipelined", "split", "flush_rows",
        "flush_rows_beside", "flush_rows_beside_handed_weights", "flush_rows_beside_two_k_steps",
    ],
)  # fmt: skip
def test_generated_flush_by_ring_tiles(launches, programs, overlap, weights, key_dim):
    """The flush by ring tiles (reverse scan + dot), and the flush launch over the flushing rows only
    (``flush_programs``, split steps; ``flush_overlap``: those rows whole, output included;
    ``flush_weights``: their ring weights from launch 1, also for a two-launch step's flush in the
    state launch), generated code. With ``ring_prefetch`` the
    state launch also holds a 4-position ring tile beside the flush's 16-position ones (Helion must
    compile both). With K = 16 = ``flush_block_k`` and handed weights a flush-rows item loads its
    checkpoint tile once for both passes (``ONE``); K = 32 takes two K steps per pass (in a two-launch
    step, through the loop ``flush_k_stages`` pipelines)."""
    p = Problem(3, 1, 2, key_dim, 16, 4)
    config = {"block_sizes": [16, 16], "num_warps": 1, "num_stages": 1, "flush_block_k": 16, "flush_tiles": 16}
    config["flush_k_stages"] = 2 if launches == 2 and key_dim > 16 else 0
    config["ring_prefetch"] = 1
    config["flush_programs"] = programs
    config["flush_overlap"] = overlap
    config["flush_weights"] = weights
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=launches, config=config)
    r = run_sequence(p, steps=2 * p.cache_length + 2, replay_fn=fn, state_dtype=torch.float32, p_force=0.3, seed=6)
    assert r.max_rel <= 1e-5 and not r.nonfinite and r.untouched_ok
    assert r.natural_flushes > 0


def test_generated_flush_keep():
    """``flush_keep``: the two-launch state launch's K loop in two copies with L2 eviction hints (flush
    rows' chunks in one, the other rows' in the other; device-valued trip counts), generated code, over
    two K chunks."""
    p = Problem(3, 1, 2, 32, 16, 4)
    config = {"block_sizes": [16, 16], "num_warps": 1, "num_stages": 1, "flush_block_k": 16, "flush_tiles": 16}
    config |= {"k_stages": 2, "flush_k_stages": 2, "ring_prefetch": 1, "flush_weights": 1, "flush_keep": 1}
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=2, config=config)
    r = run_sequence(p, steps=2 * p.cache_length + 2, replay_fn=fn, state_dtype=torch.float32, p_force=0.3, seed=8)
    assert r.max_rel <= 1e-5 and not r.nonfinite and r.untouched_ok
    assert r.natural_flushes > 0 and r.forced_flushes > 0


@pytest.mark.parametrize("flush_keep", [0, 1], ids=["entry", "keep"])
def test_generated_persistent_state_launch(monkeypatch, flush_keep):
    """The two-launch step with its state launch on a persistent grid (Helion's ``pid_type``
    persistent_interleaved, the only grid on which Helion 1.5.0 takes ``maxnreg``), generated code:
    fewer programs than (row, head, V tile) items, each program looping over several. Helion sizes
    that grid from the device's SM count, which the CPU lacks, so the test hands it 2: the 6 items
    then take 3 trips of 2 programs. ``maxnreg`` is a register cap for the GPU compiler; the
    interpreter ignores it."""
    import helion.runtime

    gpu_num_sm, asked = helion.runtime.get_num_sm, []

    def num_sm(device, **kwargs):
        if torch.device(device).type != "cpu":
            return gpu_num_sm(device, **kwargs)
        asked.append(device)
        return 2

    monkeypatch.setattr(helion.runtime, "get_num_sm", num_sm)
    p = Problem(3, 1, 2, 32, 16, 4)
    config = {"block_sizes": [16, 16], "num_warps": 1, "num_stages": 1, "flush_block_k": 16, "flush_tiles": 16}
    config |= {"k_stages": 2, "flush_k_stages": 2, "ring_prefetch": 1, "flush_weights": 1, "flush_keep": flush_keep}
    config |= {"pid_type": "persistent_interleaved", "num_sm_multiplier": 1, "maxnreg": 128}
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=2, config=config)
    r = run_sequence(p, steps=2 * p.cache_length + 2, replay_fn=fn, state_dtype=torch.float32, p_force=0.3, seed=9)
    assert asked, "the state launch did not size a persistent grid"
    assert r.max_rel <= 1e-5 and not r.nonfinite and r.untouched_ok
    assert r.natural_flushes > 0 and r.forced_flushes > 0


@pytest.mark.parametrize("prep_heads", [2, 4])
def test_generated_ring_weights_over_several_heads(prep_heads):
    """Launch 1 with ``prep_heads`` value heads per program (GQA 2: the k append by the first head of
    each group only), generated code; with handed weights for the flush rows."""
    p = Problem(3, 2, 4, 16, 16, 4)
    config = {"block_sizes": [16, 16], "num_warps": 1, "num_stages": 1, "flush_block_k": 16, "flush_tiles": 16}
    config |= {"flush_programs": 3, "flush_weights": 1, "prep_heads": prep_heads, "prep_warps": prep_heads}
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=3, config=config)
    r = run_sequence(p, steps=2 * p.cache_length + 2, replay_fn=fn, state_dtype=torch.float32, p_force=0.3, seed=7)
    assert r.max_rel <= 1e-5 and not r.nonfinite and r.untouched_ok
    assert r.natural_flushes > 0


def test_generated_standard_code():
    p = Problem(3, 1, 2, 16, 16, 1)
    r = run_sequence(
        p, steps=3, standard=True, replay_fn=helion_fused_recurrent_kda_packed_decode, state_dtype=torch.float32
    )
    assert r.max_rel <= 1e-5 and not r.nonfinite and r.untouched_ok


def test_generated_code_with_strided_views():
    from test_kernels_cpu import test_strided_views_match_the_reference as check  # same check, generated code

    check()


@pytest.mark.parametrize("flush_dot", ["tf32", "tf32x3"])
def test_generated_flush_dot_on_tf32(flush_dot):
    """A two-launch step whose state launch flushes with launch 1's ring weights through a TF32 dot
    (``flush_dot``; one pass over these bf16 rings, three), generated code, against the float64
    recurrence at the bf16-ring tolerance of the GPU tests."""
    p = Problem(3, 1, 2, 16, 16, 4)
    config = {"block_sizes": [16, 16], "num_warps": 1, "num_stages": 1, "flush_block_k": 16, "flush_tiles": 16}
    config |= {"flush_weights": 1, "ring_prefetch": 1, "flush_dot": flush_dot}
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=2, config=config)
    r = run_sequence(
        p, steps=2 * p.cache_length + 2, replay_fn=fn, state_dtype=torch.float32, cache_dtype=torch.bfloat16,
        p_force=0.3, seed=8,
    )  # fmt: skip
    assert r.max_rel <= 5e-3 and not r.nonfinite and r.untouched_ok
    assert r.natural_flushes > 0
