"""GPU-only kernel tests (marker ``gpu``; skipped without CUDA). Run on an H200 before a release:
``python -m pytest -m gpu`` and ``python -m replayssm_kernels.gpu_check``."""

from __future__ import annotations

import functools
import itertools

import pytest
import torch

from replayssm_kernels import helion_fused_recurrent_kda_packed_decode, helion_fused_recurrent_kda_replayssm_decode
from replayssm_ref import ReplaySSMCache, replayssm_decode_step
from replayssm_ref.harness import Problem, random_token, random_weights, relative_error, run_sequence

pytestmark = pytest.mark.gpu


def _check_against_float64(hv, gqa, L, state_dtype, launches, config=None):
    p = Problem(8, hv // gqa, hv, 128, 128, L)
    fn = functools.partial(
        helion_fused_recurrent_kda_replayssm_decode, precision="fast", launches=launches, config=config
    )
    r = run_sequence(
        p, steps=3 * L + 2, replay_fn=fn, state_dtype=state_dtype, cache_dtype=torch.bfloat16,
        input_dtype=torch.bfloat16, out_dtype=torch.bfloat16, device="cuda", p_force=0.2, seed=L,
    )  # fmt: skip
    tol = 5e-3 if state_dtype is torch.float32 else 3e-2
    assert not r.nonfinite and r.untouched_ok
    assert r.max_rel <= tol, (r.max_out_rel, r.max_state_rel)


DTYPES = pytest.mark.parametrize("state_dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])


@DTYPES
@pytest.mark.parametrize("L", [1, 4, 16, 64])
@pytest.mark.parametrize("hv,gqa", list(itertools.product([4, 16, 32], [1, 2])))
def test_replayssm_matches_float64_reference(hv, gqa, L, state_dtype):
    """The issue's grid for the default design (launches=None: two launches below the device table's
    ``split_flush_from_l``, three from it)."""
    _check_against_float64(hv, gqa, L, state_dtype, None)


@DTYPES
@pytest.mark.parametrize("L", [4, 16])
@pytest.mark.parametrize("launches", [2, 3, 1], ids=["two_launch", "split", "fused"])
def test_each_design_matches_float64_reference(launches, L, state_dtype):
    """Every design by name, GQA 2 at HV=32, on both sides of the default's switch."""
    _check_against_float64(32, 2, L, state_dtype, launches)


FLUSH_VARIANTS = {
    "walk": {},
    "ring_tiles": {"flush_tiles": 16},
    "flush_rows": {"flush_tiles": 16, "flush_programs": 264},
    # the flush rows whole, on a second stream beside the state launch (of high priority: 2)
    "beside": {"flush_tiles": 16, "flush_programs": 264, "flush_overlap": 1},
    "beside_high": {"flush_tiles": 16, "flush_programs": 264, "flush_overlap": 2},
    # and the ring weights handed over by launch 1
    "beside_weights": {"flush_tiles": 16, "flush_programs": 264, "flush_overlap": 2, "flush_weights": 1},
    # and each item's checkpoint tile loaded once for its output and its flush (all of K per step)
    "beside_weights_one_load": {
        "flush_tiles": 16,
        "flush_programs": 264,
        "flush_overlap": 2,
        "flush_weights": 1,
        "flush_block_k": 128,
        "flush_warps": 8,
    },
    # and the loop over a program's items pipelined (flush_stages: the next items' loads in flight), where
    # an item is straight-line code (one load, a ring of one tile: L <= 16); [32, 128] items at 8 warps
    # and [16, 128] at 4, as many programs as an SM holds by their registers (1 and 3: inspect_codegen)
    "beside_pipelined_items": {
        "flush_tiles": 16,
        "flush_programs": 132,
        "flush_overlap": 2,
        "flush_weights": 1,
        "flush_block_k": 128,
        "flush_block_v": 32,
        "flush_warps": 8,
        "flush_stages": 3,
    },
    "beside_pipelined_small_items": {
        "flush_tiles": 16,
        "flush_programs": 396,
        "flush_overlap": 2,
        "flush_weights": 1,
        "flush_block_k": 128,
        "flush_block_v": 16,
        "flush_warps": 4,
        "flush_stages": 3,
    },
    # and launch 1 over two value heads per program (one warp each)
    "beside_two_heads": {
        "flush_tiles": 16,
        "flush_programs": 264,
        "flush_overlap": 2,
        "prep_heads": 2,
        "prep_warps": 2,
    },
}


@DTYPES
@pytest.mark.parametrize("L", [4, 16, 64])
@pytest.mark.parametrize("flush", list(FLUSH_VARIANTS))
def test_split_flush_variants_match_float64_reference(flush, L, state_dtype):
    """The split design's flush launch: the ring walk, ring tiles (a dot), over flush rows only, and
    over flush rows whole beside the state launch (two streams), with their ring weights from launch 1."""
    config = {"block_sizes": [64, 32], "num_warps": 2, "num_stages": 1, "k_stages": 3, "ring_prefetch": 1}
    config |= {"flush_block_v": 32, "flush_block_k": 32, "flush_warps": 4, **FLUSH_VARIANTS[flush]}
    _check_against_float64(32, 2, L, state_dtype, 3, config)


PERSISTENT = {"pid_type": "persistent_interleaved", "num_sm_multiplier": 8, "maxnreg": 128}
KEEP_PERSISTENT = {"flush_keep": 1, **PERSISTENT}
TWO_LAUNCH_FLUSHES = {
    "walk": {"flush_block_k": 32},
    # the state launch's flush by ring tiles with launch 1's ring weights (flush_weights), 16 or 32
    # K channels per step
    "handed_weights": {"flush_tiles": 16, "flush_block_k": 16, "flush_weights": 1},
    "handed_weights_fk32": {"flush_tiles": 16, "flush_block_k": 32, "flush_weights": 1},
    # the flush's dot on TF32 tensor cores (flush_dot): one pass (d of these bf16 rings is exact in
    # TF32, the fp32 ring weights are rounded) and three
    "handed_weights_tf32": {"flush_tiles": 16, "flush_block_k": 16, "flush_weights": 1, "flush_dot": "tf32"},
    "handed_weights_tf32x3": {"flush_tiles": 16, "flush_block_k": 16, "flush_weights": 1, "flush_dot": "tf32x3"},
    # the K loop in two copies with L2 hints, flush rows' chunks evict_last (flush_keep)
    "handed_weights_keep": {"flush_tiles": 16, "flush_block_k": 16, "flush_weights": 1, "flush_keep": 1},
    # the state launch on a persistent grid of 8 programs per SM, its registers capped at 128 (run 36)
    "handed_weights_persistent": {"flush_tiles": 16, "flush_block_k": 16, "flush_weights": 1, **PERSISTENT},
    "handed_weights_keep_persistent": {"flush_tiles": 16, "flush_block_k": 16, "flush_weights": 1, **KEEP_PERSISTENT},
}


@DTYPES
@pytest.mark.parametrize("L", [4, 8, 16, 64])
@pytest.mark.parametrize("flush", list(TWO_LAUNCH_FLUSHES))
def test_two_launch_flushes_match_float64_reference(flush, L, state_dtype):
    """The two-launch design's flush in the state launch: the ring walk, and ring tiles with launch 1's
    ring weights (the H100's default at L = 8 and 16 since run 30)."""
    config = {"block_sizes": [64, 32], "num_warps": 2, "num_stages": 1, "k_stages": 3, "ring_prefetch": 1}
    _check_against_float64(32, 2, L, state_dtype, 2, config | TWO_LAUNCH_FLUSHES[flush])


def test_standard_matches_float64_reference():
    p = Problem(8, 16, 32, 128, 128, 1)
    r = run_sequence(
        p, steps=6, standard=True, replay_fn=helion_fused_recurrent_kda_packed_decode, state_dtype=torch.float32,
        input_dtype=torch.bfloat16, out_dtype=torch.bfloat16, device="cuda",
    )  # fmt: skip
    assert r.max_rel <= 5e-3 and not r.nonfinite and r.untouched_ok


@pytest.mark.parametrize("launches", [2, 3, 1, "beside"], ids=["two_launch", "split", "fused", "split_beside"])
def test_cuda_graph_replay_with_device_side_cursor_and_flush_changes(launches):
    """Capture one step, then change write_pos / force_flush in place between replays: each replay
    must equal an eager reference step with the new values (strided state slots included).
    ``beside``: the flush rows' launch on a second stream, a fork and a join inside the graph."""
    precision, config = "precise", None
    if launches == "beside":
        precision, launches = "fast", 3
        config = {"block_sizes": [64, 32], "num_warps": 2, "num_stages": 1, "k_stages": 3, "ring_prefetch": 1}
        config |= {"flush_block_k": 32, "flush_warps": 4, **FLUSH_VARIANTS["beside_weights"]}
    p = Problem(6, 2, 4, 128, 128, 4, spare_slots=3)
    dev = "cuda"
    gen = torch.Generator().manual_seed(0)
    w = random_weights(p, gen, dev, torch.float32)
    mixed, a, b = random_token(p, gen, dev, torch.bfloat16)
    # A padded slot stride: the state is a strided view into a larger buffer.
    buf = torch.randn(p.num_slots, p.num_v_heads + 1, p.value_dim, p.key_dim, device=dev) * 0.3
    state = buf[:, 1:]
    cache = ReplaySSMCache.allocate(
        num_slots=p.num_slots, batch=p.batch, num_q_heads=p.num_q_heads, num_v_heads=p.num_v_heads,
        key_dim=p.key_dim, value_dim=p.value_dim, cache_length=p.cache_length, cache_dtype=torch.float32, device=dev,
    )  # fmt: skip
    cache.d_cache.normal_(0, 0.1)
    cache.k_cache.normal_(0, 0.1)
    cache.g_cache.uniform_(-0.2, 0)
    idx = torch.tensor([0, 2, -1, 4, 5, 7], device=dev, dtype=torch.int32)
    force = torch.zeros(p.batch, device=dev, dtype=torch.int32)
    out = torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, device=dev, dtype=torch.float32)

    def step():
        helion_fused_recurrent_kda_replayssm_decode(
            mixed, a, b, w.A_log, w.dt_bias, w.scale, state, cache.d_cache, cache.k_cache, cache.g_cache, out,
            idx, cache.write_pos, force, True, None, precision=precision, check_values=False, launches=launches,
            config=config,
        )  # fmt: skip

    snapshot = [t.clone() for t in (buf, cache.d_cache, cache.k_cache, cache.g_cache)]
    step()  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for wp, ff in [([0, 1, 2, 3, 0, 2], [0] * 6), ([3, 0, 1, 2, 1, 3], [0, 1, 0, 0, -1, 0]), ([2] * 6, [1] * 6)]:
        for t, s in zip((buf, cache.d_cache, cache.k_cache, cache.g_cache), snapshot, strict=True):
            t.copy_(s)
        cache.write_pos.copy_(torch.tensor(wp, dtype=torch.int32))
        force.copy_(torch.tensor(ff, dtype=torch.int32))
        ref_state = state.double().clone()
        ref_rings = [cache.d_cache.double().clone(), cache.k_cache.double().clone(), cache.g_cache.double().clone()]
        ref_out = torch.empty_like(out, dtype=torch.float64)
        replayssm_decode_step(
            mixed.double(), a.double(), b.double(), w.A_log.double(), w.dt_bias.double(), w.scale, ref_state,
            *ref_rings, ref_out, idx, cache.write_pos, force, True, None,
        )  # fmt: skip
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert relative_error(out, ref_out) < 1e-4
        assert relative_error(state, ref_state) < 1e-4
        assert relative_error(cache.d_cache, ref_rings[0]) < 1e-4
        assert torch.equal(buf[:, 0], snapshot[0][:, 0])  # the padding head of the strided buffer is untouched


@pytest.mark.parametrize("extra", [{}, PERSISTENT], ids=["flat", "persistent_capped"])
def test_device_resources_read_the_launch_that_ran(extra):
    """``tune``'s register columns: after a timed step, each launch's own compile is found, with the warps
    its config asked for, and a ``maxnreg`` cap shows in its register count."""
    from replayssm_kernels.bench import Case, Workload
    from replayssm_kernels.inspect_codegen import device_resources
    from replayssm_kernels.kda_decode import run_launches

    work = Workload(Case(64, 32, 32, 128, 128, 16, "float32", "bfloat16"), sets=1, device=torch.device("cuda"))
    config = {"block_sizes": [64, 32], "num_warps": 2, "num_stages": 1, "prep_warps": 1, "flush_tiles": 16}
    config |= {"flush_block_k": 16, "flush_weights": 1, **extra}
    plan = work.plan("replayssm_helion_two_launch", "fast", config=config)
    run_launches(plan)
    torch.cuda.synchronize()
    found = {launch.name: device_resources(launch) for launch in plan}
    assert set(found) == {"ring_weights", "state"}
    assert found["ring_weights"]["num_warps"] == 1 and found["state"]["num_warps"] == 2
    for r in found.values():
        assert 0 < r["registers"] <= 255 and r["local_bytes"] >= 0 and 1 <= r["programs_per_sm"] <= 32, r
    if extra:
        assert found["state"]["registers"] <= extra["maxnreg"]
