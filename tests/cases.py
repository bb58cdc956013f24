"""What the kernel tests share: the designs under the configs the GPU tables use, scaled to test shapes,
the problem grid, and one way to run a sequence and assert on it."""

from __future__ import annotations

import functools

import torch

from replayssm_kernels import helion_fused_recurrent_kda_replayssm_decode
from replayssm_ref.harness import Problem, SequenceResult, run_sequence, tolerance

# Each committed table entry's shape, scaled from K = V = 128 to the tests' K = V = 32: a [64, 32] tile
# becomes [16, 8] (two V tiles, four K chunks), flush_block_k 32 or 64 becomes 16 (two K steps), so
# several V tiles, K chunks and flush steps run, as on the GPU, and every option a table sets is on.
SCALED = {"block_sizes": [16, 8], "num_warps": 2, "num_stages": 1, "k_stages": 3, "flush_block_k": 16}
DESIGNS = {
    # launches=None with the CPU's fallback table (default.json)
    "default": (None, None),
    # H100 two launches, fp32 LB8: the flush walks the ring; launch 1 pipelined
    "two_walk": (2, SCALED | {"prep_stages": 2}),
    # H100 two launches, LB16: the flush by tiles of launch 1's weights, its K loop pipelined
    "two_tiles": (
        2,
        SCALED | {"flush_tiles": 16, "flush_weights": 1, "prep_stages": 4, "ring_chunk": 2, "flush_k_stages": 3},
    ),
    # H200 three launches, LB8: the per-row flush launch
    "split_rows_walk": (3, SCALED),
    # H200 three launches, LB16: flush_programs over the flushing rows, own weights
    "split_programs": (3, SCALED | {"flush_block_v": 16, "flush_warps": 4, "flush_tiles": 16, "flush_programs": 5}),
    # H100 three launches, LB32/64: beside the state launch, launch 1's weights
    "split_overlap": (
        3,
        SCALED
        | {
            "flush_block_v": 16,
            "flush_warps": 4,
            "flush_tiles": 16,
            "flush_programs": 5,
            "flush_overlap": 2,
            "flush_weights": 1,
            "prep_stages": 2,
        },
    ),  # fmt: skip
}


def design_fn(name: str, **kwargs):
    launches, config = DESIGNS[name]
    return functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=launches, config=config, **kwargs)


def check_sequence(
    p: Problem, fn, *, steps: int, state_dtype=torch.float32, cache_dtype=None, out_dtype=None, flushes=True, **kw
) -> SequenceResult:
    """Run ``fn`` beside the float64 oracle and assert: finite, untouched bytes untouched, within the
    dtype-derived tolerance per (row, head), and (``flushes``) both natural and forced flushes seen."""
    cache_dtype = cache_dtype or state_dtype
    r = run_sequence(
        p, steps=steps, replay_fn=fn, state_dtype=state_dtype, cache_dtype=cache_dtype, out_dtype=out_dtype,
        check_materialized=True, **kw,
    )  # fmt: skip
    tol = tolerance(state_dtype, cache_dtype, out_dtype or torch.float32, steps=steps)
    assert not r.nonfinite and r.untouched_ok, r.problems
    assert r.max_rel <= tol, (r.out_rel, r.state_rel, r.ring_rel, tol)
    if flushes:
        assert r.natural_flushes > 0 and r.forced_flushes > 0, (r.natural_flushes, r.forced_flushes)
    return r
