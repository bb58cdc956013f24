"""What the kernel tests share: the designs under the configs the GPU tables use, scaled to test shapes,
the problem grid, and one way to run a sequence and assert on it."""

from __future__ import annotations

import functools

import pytest
import torch

from replayssm_kernels import helion_fused_recurrent_gdn_replayssm_decode, helion_fused_recurrent_kda_replayssm_decode
from replayssm_ref.harness import (
    Problem,
    SequenceResult,
    random_token,
    random_weights,
    run_sequence,
    same_bits,
    tolerance,
)  # fmt: skip

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
# One launch (kernels.fused): GDN and the predecayed format only (KDA's raw ring needs launch 1)
SCALAR_DESIGNS = {"fused": (1, SCALED)}


def design_fn(name: str, gate: str = "kda", **kwargs):
    """The design's decode call for ``gate`` (``"gdn"``: the Gated DeltaNet entry point)."""
    launches, config = (DESIGNS | SCALAR_DESIGNS)[name]
    fn = helion_fused_recurrent_gdn_replayssm_decode if gate == "gdn" else helion_fused_recurrent_kda_replayssm_decode
    return functools.partial(fn, launches=launches, config=config, **kwargs)


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


def step_args(p: Problem, seed: int = 0, state_dtype=torch.float32, device="cpu", gate="kda"):
    """One step's positional arguments up to ``write_pos``, with random rings everywhere and random
    cursors in [0, L) (stale positions hold finite values: these tests are about writes)."""
    gen = torch.Generator().manual_seed(seed)
    w = random_weights(p, gen, device, gate=gate)
    mixed, a, b = random_token(p, gen, device, torch.float32, gate=gate)
    S = torch.randn(p.num_slots, p.num_v_heads, p.value_dim, p.key_dim, generator=gen).to(device, state_dtype)
    L = p.cache_length
    d = torch.randn(p.num_slots, p.num_v_heads, L, p.value_dim, generator=gen).to(device)
    k = torch.nn.functional.normalize(torch.randn(p.num_slots, p.num_q_heads, L, p.key_dim, generator=gen), dim=-1)
    g = -torch.rand(p.num_slots, p.num_v_heads, L, p.key_dim, generator=gen).to(device)
    if gate == "gdn":
        g = g[..., 0].contiguous()
    out = torch.full((p.batch, 1, p.num_v_heads, p.value_dim), float("nan"), device=device)
    idx = torch.randperm(p.num_slots, generator=gen)[: p.batch].to(device, torch.int32)
    wp = torch.randint(0, L, (p.batch,), generator=gen).to(device, torch.int32)
    return (mixed, a, b, w.A_log, w.dt_bias, w.scale, S, d, k.to(device), g, out, idx, wp)


def check_corrupted_rows(design: str, p: Problem, device="cpu", gate="kda") -> None:
    """Rows 0 and 1 get cursors L + 2 and -3, row 2 a slot past the pool, row 3 a forced flush: the
    step must equal, bit for bit in every state slot, ring and output, the same step with rows 0-2 as
    padding (zero output, nothing written); with ``check_values=True`` it raises instead."""
    *head, idx, wp = step_args(p, seed=3, device=device, gate=gate)
    tail = (True,) if gate == "gdn" else (True, None)  # l2norm (, lower_bound)
    bad_wp, bad_idx, pad_idx = wp.clone(), idx.clone(), idx.clone()
    bad_wp[0], bad_wp[1] = p.cache_length + 2, -3
    bad_idx[2] = p.num_slots + 5
    pad_idx[:3] = -1
    force = torch.zeros_like(wp)
    force[3] = 1
    clean = [t.clone() if isinstance(t, torch.Tensor) else t for t in head]
    fn = design_fn(design, gate, check_values=False)
    fn(*clean, pad_idx, wp, force, *tail)  # the healthy rows alone
    fn(*head, bad_idx, bad_wp, force, *tail)
    assert (head[10][:3] == 0).all()
    for got, want in zip(head[6:11], clean[6:11], strict=True):  # state, d, k, g, out
        assert same_bits(got, want)
    with pytest.raises(ValueError, match="write_pos"):
        design_fn(design, gate, check_values=True)(*head, idx, bad_wp, force, *tail)
