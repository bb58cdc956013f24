"""Helion kernels against the reference on the CPU, through Helion's interpreter (HELION_INTERPRET=1):
the kernel bodies run as eager PyTorch, which checks their logic (indexing, masking, flush/append
paths) without a GPU. The README's test command sets the variable; without it (and without a GPU)
these tests skip."""

from __future__ import annotations

import functools
import os

import helion
import pytest
import torch

from replayssm_kernels import helion_fused_recurrent_kda_packed_decode, helion_fused_recurrent_kda_replayssm_decode
from replayssm_ref.harness import Problem, run_sequence

pytestmark = pytest.mark.skipif(
    os.environ.get("HELION_INTERPRET") != "1" and not torch.cuda.is_available(),
    reason="needs HELION_INTERPRET=1 (CPU) or a GPU",
)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
GRID = [
    Problem(3, 1, 1, 16, 16, 1),
    Problem(4, 2, 4, 16, 32, 2),  # GQA, K != V
    Problem(3, 1, 2, 32, 16, 3),  # non-power-of-two L
    Problem(4, 2, 2, 16, 16, 5),
    Problem(3, 2, 4, 16, 16, 8),
]


@pytest.mark.parametrize("launches", [None, 2, 3, 1], ids=["default", "two_launch", "split", "fused"])
@pytest.mark.parametrize("precision", ["fast", "precise"])
@pytest.mark.parametrize("p", GRID, ids=Problem.label)
def test_replayssm_kernel_matches_reference(p, precision, launches):
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, precision=precision, launches=launches)
    r = run_sequence(
        p, steps=2 * p.cache_length + 3, replay_fn=fn, state_dtype=torch.float32, device=DEVICE,
        p_force=0.25, seed=p.cache_length, check_materialized=True,
    )  # fmt: skip
    assert not r.nonfinite and r.untouched_ok  # NaN-filled stale rings never leak; sentinels untouched
    assert r.max_rel <= 1e-5, (r.max_out_rel, r.max_state_rel)
    assert r.natural_flushes + r.forced_flushes > 0


@pytest.mark.parametrize("ring_prefetch", [0, 1], ids=["ring_loop", "ring_once"])
@pytest.mark.parametrize("k_stages", [1, 3])
@pytest.mark.parametrize("launches", [2, 3], ids=["two_launch", "split"])
@pytest.mark.parametrize("precision", ["fast", "precise"])
@pytest.mark.parametrize("L", [3, 4])
def test_state_launch_streams_the_checkpoint_in_K_chunks(L, precision, launches, k_stages, ring_prefetch):
    """The state launch's checkpoint mat-vecs in K chunks narrower than K (and than the flush's FK):
    partial sums across chunks, the full-K q/k scales and the current token's (k . q) still match;
    so does the ring loaded as one tile beside them (L = 3: its tile runs past the ring, masked)."""
    p = Problem(3, 2, 4, 32, 16, L)
    config = {"block_sizes": [8, 8], "num_warps": 1, "num_stages": 1, "k_stages": k_stages, "flush_block_k": 16}
    config["ring_prefetch"] = ring_prefetch
    fn = functools.partial(
        helion_fused_recurrent_kda_replayssm_decode, precision=precision, launches=launches, config=config
    )
    r = run_sequence(
        p, steps=2 * p.cache_length + 3, replay_fn=fn, state_dtype=torch.float32, device=DEVICE,
        p_force=0.25, seed=11, check_materialized=True,
    )  # fmt: skip
    assert not r.nonfinite and r.untouched_ok
    assert r.max_rel <= 1e-5, (r.max_out_rel, r.max_state_rel)
    assert r.natural_flushes + r.forced_flushes > 0


@pytest.mark.parametrize("ring_chunk", [1, 2, 4])
@pytest.mark.parametrize("launches", [2, 3], ids=["two_launch", "split"])
@pytest.mark.parametrize("L", [6, 8])
def test_ring_walk_in_unrolled_chunks(L, launches, ring_chunk):
    """Launch 1 and the flush walk the ring newest first in unrolled chunks of ``ring_chunk`` positions
    (L = 6 takes at most 2): the walk starts at the chunk holding c - 1, carries the suffix sums
    across chunks and reads nothing at or past the cursor; every cursor 0..L-1 is reached, with forced
    flushes among them."""
    p = Problem(3, 2, 4, 16, 16, L)
    config = {"block_sizes": [8, 8], "num_warps": 1, "num_stages": 1, "ring_chunk": ring_chunk}
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=launches, config=config)
    r = run_sequence(
        p, steps=2 * L + 3, replay_fn=fn, state_dtype=torch.float32, device=DEVICE, p_force=0.2, seed=L + ring_chunk,
        check_materialized=True,
    )  # fmt: skip
    assert not r.nonfinite and r.untouched_ok
    assert r.max_rel <= 1e-5, (r.max_out_rel, r.max_state_rel)


@pytest.mark.parametrize(
    ("launches", "weights"), [(2, 0), (3, 0), (3, 1)], ids=["two_launch", "split", "split_handed_weights"]
)
@pytest.mark.parametrize(("hv", "gqa", "prep_heads"), [(4, 2, 2), (4, 1, 4), (8, 4, 4), (6, 2, 4)])
def test_ring_weights_over_several_heads(hv, gqa, prep_heads, launches, weights):
    """Launch 1 with ``prep_heads`` value heads per program: per-head norms, gates and ring walks side
    by side, the k append once per q/k head (by the first value head of its group; GQA up to 4), and
    (HV = 6) one head per program where the option does not divide HV."""
    p = Problem(3, hv // gqa, hv, 16, 16, 5)
    config = {"block_sizes": [8, 8], "num_warps": 1, "num_stages": 1, "prep_heads": prep_heads}
    if launches == 3:
        config |= {"flush_tiles": 16, "flush_programs": 4, "flush_weights": weights}
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=launches, config=config)
    r = run_sequence(
        p, steps=2 * p.cache_length + 3, replay_fn=fn, state_dtype=torch.float32, device=DEVICE, p_force=0.2,
        seed=hv + prep_heads, check_materialized=True,
    )  # fmt: skip
    assert not r.nonfinite and r.untouched_ok
    assert r.max_rel <= 1e-5, (r.max_out_rel, r.max_state_rel)
    assert r.natural_flushes + r.forced_flushes > 0


@pytest.mark.parametrize("precision", ["fast", "precise"])
@pytest.mark.parametrize("flush", [dict(flush_block_v=16, flush_warps=2), dict(flush_block_v=4, flush_block_k=32)])
def test_flush_launch_with_its_own_tile(flush, precision):
    """A split step whose flush launch tiles V (and K) differently from its state launch."""
    from replayssm_kernels.kda_decode import KERNEL_OPTIONS, _state_configs

    config = {"block_sizes": [8, 8], "num_warps": 1, "num_stages": 1, "k_stages": 2, **flush}
    state, flush_cfg = _state_configs(helion.Config(block_sizes=[8, 8], num_warps=1), KERNEL_OPTIONS | config, True)
    assert flush_cfg.block_sizes[0] == flush["flush_block_v"] and state.block_sizes == [8, 8]
    assert flush_cfg.num_warps == flush.get("flush_warps", 1) and "range_num_stages" not in dict(flush_cfg)
    p = Problem(3, 2, 4, 32, 16, 4)
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, precision=precision, launches=3, config=config)
    r = run_sequence(
        p, steps=2 * p.cache_length + 3, replay_fn=fn, state_dtype=torch.float32, device=DEVICE, p_force=0.3,
        seed=3, check_materialized=True,
    )  # fmt: skip
    assert not r.nonfinite and r.untouched_ok
    assert r.max_rel <= 1e-5, (r.max_out_rel, r.max_state_rel)


@pytest.mark.parametrize("flush_tiles", [16, 32])
@pytest.mark.parametrize(
    "launches",
    [2, "weights", "weights_pipelined", "weights_keep", 3, "rows"],
    ids=[
        "two_launch", "two_launch_handed_weights", "two_launch_handed_weights_pipelined",
        "two_launch_handed_weights_keep", "split", "split_flush_rows",
    ],
)  # fmt: skip
@pytest.mark.parametrize("L", [4, 16, 40])
def test_flush_by_ring_tiles(L, launches, flush_tiles):
    """The closed-form flush a [16-32, FK] ring tile at a time (reverse scan + dot): one tile past a
    short ring, one exact tile, and three tiles over a ring that does not fill the last. ``rows``: the
    flush launch over the flushing rows only, with fewer programs than work items. ``weights``: a
    two-launch step whose state launch flushes with launch 1's ring weights (``flush_weights``);
    ``pipelined``: its loop over FK steps pipelined (``flush_k_stages``, written through ``state_out``);
    ``keep``: as ``pipelined``, with the K loop in two copies, one for flush rows and one for the others
    (``flush_keep``), whose trip counts are device values."""
    from replayssm_kernels.kda_decode import KERNEL_OPTIONS, flush_ring_tile

    config = {"block_sizes": [16, 16], "num_warps": 1, "num_stages": 1, "flush_block_k": 16, "flush_tiles": flush_tiles}
    if launches == "rows":
        launches, config["flush_programs"] = 3, 5
    if launches in ("weights", "weights_pipelined", "weights_keep"):
        config["flush_k_stages"] = 0 if launches == "weights" else 3
        if launches == "weights_keep":
            config |= {"k_stages": 2, "flush_keep": 1}
        launches, config["flush_weights"] = 2, 1
    assert flush_ring_tile(L, KERNEL_OPTIONS | config, 16, 16) == max(16, min(flush_tiles, 1 << (L - 1).bit_length()))
    assert flush_ring_tile(L, KERNEL_OPTIONS | config, 8, 16) == 0  # narrower than a dot: the walk
    p = Problem(3, 2, 4, 32, 16, L)
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=launches, config=config)
    r = run_sequence(
        p, steps=2 * L + 3, replay_fn=fn, state_dtype=torch.float32, device=DEVICE, seed=L,
        check_materialized=True,
    )  # fmt: skip
    assert not r.nonfinite and r.untouched_ok
    assert r.max_rel <= 1e-5, (r.max_out_rel, r.max_state_rel)
    assert r.natural_flushes > 0 and r.forced_flushes > 0


@pytest.mark.parametrize("flush_dot", ["ieee", "tf32", "tf32x3"])
def test_flush_dot_reaches_the_launches_that_flush(flush_dot):
    """``flush_dot`` sets the dot precision of the launches that flush by ring tiles (the state launch
    of a two-launch step, the flush or flush-rows launch of a split one), never launch 1's; a one-pass
    TF32 dot is kept to rings whose ``d`` it holds exactly (bf16), three passes over an fp32 ring; the
    precise flush has no dot; an unknown value is refused before anything runs."""
    from replayssm_kernels.inspect_codegen import _problem_inputs
    from replayssm_kernels.kda_decode import replayssm_launches

    common, caches, out, idx, write_pos = _problem_inputs(2, 16, 16, 16, torch.float32)
    base = {"block_sizes": [16, 16], "num_warps": 1, "num_stages": 1, "flush_block_k": 16, "flush_tiles": 16}
    rows = {"flush_programs": 3, "flush_weights": 1}
    fp32_rings = tuple(c.float() for c in caches)
    for launches, extra, rings, precision, want in [
        (2, {"flush_weights": 1}, caches, "fast", flush_dot),
        (3, {}, caches, "fast", flush_dot),
        (3, rows, caches, "fast", flush_dot),
        (2, {"flush_weights": 1}, fp32_rings, "fast", "tf32x3" if flush_dot == "tf32" else flush_dot),
        (2, {}, caches, "precise", "ieee"),
    ]:
        config = base | extra | {"flush_dot": flush_dot}
        plan = replayssm_launches(
            *common, *rings, out, idx, write_pos, None, True, precision=precision, launches=launches, config=config
        )
        dots = {launch.name: launch.dot_precision for launch in plan}
        assert dots.pop("ring_weights") == "ieee" and set(dots.values()) == {want}, (launches, extra, dots)
    with pytest.raises(ValueError, match="flush_dot"):
        replayssm_launches(
            *common, *caches, out, idx, write_pos, None, True, launches=2, config=base | {"flush_dot": "fp16"}
        )


def _flush_first(*args, **kwargs):
    """A decode step with the launches in the order ring weights, flush rows, state: the opposite of
    ``run_launches`` off CUDA, for a launch that is meant to run beside the state launch."""
    from replayssm_kernels.kda_decode import replayssm_launches

    plan = replayssm_launches(*args, **kwargs)
    assert [launch.name for launch in plan] == ["ring_weights", "state", "flush_rows"] and plan[2].beside
    for launch in (plan[0], plan[2], plan[1]):
        launch()
    return args[10], args[6]


@pytest.mark.parametrize("fk", [16, 32], ids=["two_k_steps", "one_k_step"])
@pytest.mark.parametrize("weights", [0, 1], ids=["own_weights", "handed_weights"])
@pytest.mark.parametrize("order", ["state_first", "flush_first"])
@pytest.mark.parametrize("L", [4, 16, 40])
def test_flush_rows_beside_the_state_launch(L, order, weights, fk):
    """``flush_overlap``: the flush-rows launch takes the flush rows whole (output, u, checkpoint) and
    the state launch skips them, so the two can run at the same time on two streams. Run here in both
    orders: were one to read what the other writes (a flush row's checkpoint, a stale output), one of
    the orders would differ from the float64 reference. Forced flushes and padding rows included.
    ``flush_weights``: launch 1 hands the flush its ring weights (L=40: three ring tiles of them).
    ``fk`` = K (32), with handed weights and one ring tile (L = 4, 16): an item's one checkpoint load
    serves its output and its flush (``ONE``)."""
    config = {
        "block_sizes": [16, 16], "num_warps": 1, "num_stages": 1, "flush_block_k": fk, "flush_tiles": 16,
        "flush_programs": 5, "flush_overlap": 1, "flush_weights": weights,
    }  # fmt: skip
    base = _flush_first if order == "flush_first" else helion_fused_recurrent_kda_replayssm_decode
    fn = functools.partial(base, launches=3, config=config)
    p = Problem(3, 2, 4, 32, 16, L)
    r = run_sequence(
        p, steps=2 * L + 3, replay_fn=fn, state_dtype=torch.float32, device=DEVICE, seed=L + 1,
        check_materialized=True,
    )  # fmt: skip
    assert not r.nonfinite and r.untouched_ok
    assert r.max_rel <= 1e-5, (r.max_out_rel, r.max_state_rel)
    assert r.natural_flushes > 0 and r.forced_flushes > 0


_PIPELINED_LOOPS = """
import json, re, sys, torch
from replayssm_kernels.inspect_codegen import generated_source
found = {}
for kind in ("state", "state_split", "flush"):
    for prefetch in (0, 1):
        extra = {"k_stages": 3, "ring_prefetch": prefetch}
        source, *_ = generated_source(kind, 16, 32, 1, torch.float32, "fast", extra=extra, block_k=32)
        found[f"{kind}/{prefetch}"] = re.findall(r"tl\\.range\\(([^\\n]*num_stages=\\d)\\)", source)
rows = {"flush_tiles": 16, "flush_programs": 8, "flush_overlap": 2, "flush_weights": 1, "flush_stages": 3}
for fk in (128, 64):  # all of K: an item is straight-line code (ONE); half: two K steps, an inner loop
    extra = rows | {"flush_block_k": fk, "flush_block_v": 32}
    source, *_ = generated_source("flush", 16, 32, 8, torch.float32, "fast", extra=extra, block_k=32)
    found[f"rows/{fk}"] = re.findall(r"tl\\.range\\(([^\\n]*num_stages=\\d)\\)", source)
for kind in ("state", "state_split"):  # flush_k_stages: the two-launch state launch's flush loop over FK steps
    extra = {"k_stages": 3, "ring_prefetch": 1, "flush_tiles": 16, "flush_weights": 1, "flush_k_stages": 2}
    source, *_ = generated_source(kind, 16, 32, 1, torch.float32, "fast", extra=extra | {"flush_block_k": 16})
    found[f"fk/{kind}"] = re.findall(r"tl\\.range\\(([^\\n]*num_stages=\\d)\\)", source)
for dot in ("ieee", "tf32"):  # flush_dot: the precision of the state launch's flush dot (a bf16 ring)
    extra = {"flush_tiles": 16, "flush_weights": 1, "flush_block_k": 16, "flush_dot": dot}
    source, *_ = generated_source("state", 16, 32, 1, torch.float32, "fast", extra=extra)
    found[f"dot/{dot}"] = re.findall(r"input_precision='(\\w+)'", source)
for kind in ("state", "state_split"):  # flush_keep: the K loop twice, L2 hints on the checkpoint's loads
    for keep in (0, 1):
        extra = {"k_stages": 3, "ring_prefetch": 1, "flush_tiles": 16, "flush_weights": 1, "flush_block_k": 16}
        source, *_ = generated_source(kind, 16, 32, 1, torch.float32, "fast", extra=extra | {"flush_keep": keep})
        found[f"keep/{kind}/{keep}"] = [
            re.findall(r"tl\\.range\\(([^\\n]*num_stages=\\d)\\)", source),
            re.findall(r"tl\\.load\\(initial_state [^\\n]*eviction_policy='(\\w+)'", source),
        ]
for kind in ("ring_weights", "ring_weights_split"):  # prep_stages: launch 1's loop over ring chunks
    extra = {"prep_stages": 3, "ring_chunk": 4, "flush_tiles": 16, "flush_programs": 8, "flush_weights": 1}
    source, *_ = generated_source(kind, 16, 32, 1, torch.float32, "fast", extra=extra)
    found[kind] = re.findall(r"tl\\.range\\(([^\\n]*num_stages=\\d)\\)", source)
# launch 1's global loads and stores in SASS order (the H100 entry's launch 1 at L=16, without and with
# prep_stages): why prep_stages pays
from replayssm_kernels.inspect_codegen import compile_sm90, sass_memory_order
for stages, chunk in ((0, 8), (4, 2)):  # 8 positions unrolled per chunk; the table's pipelined entry
    extra = {"prep_stages": stages, "ring_chunk": chunk, "flush_tiles": 16, "flush_weights": 1, "flush_block_k": 16}
    source, tensors, config = generated_source("ring_weights", 16, 32, 1, torch.float32, "fast", extra=extra)
    found[f"order/{stages}"] = sass_memory_order(compile_sm90(source, tensors, 1).asm["cubin"])
print(json.dumps(found))
"""


def test_k_stages_pipelines_the_checkpoint_K_loop():
    """``k_stages`` lands on the loop over checkpoint K chunks (Helion's range_* lists are positional,
    and the ring's loop is there only without ring_prefetch), and the flush launch of a split step
    gets no pipelining meant for another loop; ``flush_k_stages`` on a two-launch state launch's flush
    loop over FK steps; ``flush_stages`` lands on the flush-rows launch's item
    loop, only where an item has no inner loop; ``prep_stages`` on launch 1's loop over ring chunks,
    whose loads then no longer wait behind stores (SASS order); and ``flush_dot`` reaches the state
    launch's flush dot; ``flush_keep`` doubles the K loop with L2 hints. Generated code, so outside
    Helion's interpreter."""
    import json
    import re
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("HELION_INTERPRET", "TRITON_INTERPRET")}
    run = subprocess.run([sys.executable, "-c", _PIPELINED_LOOPS], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout.splitlines()[-1])
    loop = ["0, 128, _BLOCK_SIZE_1, num_stages=3"]
    assert found["state/0"] == found["state_split/0"] == found["state/1"] == found["state_split/1"] == loop
    assert found["flush/0"] == found["flush/1"] == []
    # flush_k_stages: the two-launch state launch's flush loop over FK steps (8 of them), after the K loop;
    # a split state launch has no flush
    assert found["fk/state"] == [*loop, "0, 128, _BLOCK_SIZE_5, num_stages=2"], found["fk/state"]
    assert found["fk/state_split"] == loop
    # flush_dot: the state launch's one flush dot gets the precision the config names
    assert found["dot/ieee"] == ["ieee"] and found["dot/tf32"] == ["tf32"], (found["dot/ieee"], found["dot/tf32"])
    # flush_keep: the K loop twice, both pipelined, the first over the flush rows' chunks (K or none) with
    # evict_last, the second over the rest with evict_first; only where the state launch flushes
    ranges, hints = found["keep/state/1"]
    assert len(ranges) == 2 and hints == ["evict_last", "evict_first"], found["keep/state/1"]
    assert re.fullmatch(r"0, tl\.cast\((\w+), tl\.int32\), _BLOCK_SIZE_1, num_stages=3", ranges[0])
    assert re.fullmatch(r"tl\.cast\((\w+), tl\.int32\), 128, _BLOCK_SIZE_1, num_stages=3", ranges[1])
    assert found["keep/state/0"] == found["keep/state_split/0"] == found["keep/state_split/1"] == [loop, []]
    # flush_stages: the flush-rows launch's loop over its items (bounded by the flushing rows' count), and
    # only where it is the innermost loop
    assert len(found["rows/128"]) == 1 and re.fullmatch(
        r"0, tl\.cast\(\w+, tl\.int32\), num_stages=3", found["rows/128"][0]
    )
    assert found["rows/64"] == []
    # prep_stages: launch 1's loop over ring chunks (L // ring_chunk = 4 of them, from the one holding
    # the newest live entry), in both designs
    for kind in ("ring_weights", "ring_weights_split"):
        assert len(found[kind]) == 1 and re.fullmatch(r"tl\.cast\(\w+, tl\.int32\), 4, num_stages=3", found[kind][0])
    # Unpipelined, each ring position's two loads (k, g) come after the previous position's stores (two
    # coef scalars and its handed weights) in launch 1's SASS: a memory round trip per position, 7 of
    # them within an unrolled chunk of 8. Pipelined, the ring is read by async copies and no load
    # follows a store.
    if found["order/0"]:  # "" where Triton ships no nvdisasm
        assert found["order/0"].count("SLL") >= 7, found["order/0"]
        first_store = found["order/4"].index("S")
        assert "A" in found["order/4"] and "L" not in found["order/4"][first_store:], found["order/4"]


_CACHE_HINTS = """
import glob, json, re, sys, torch
from replayssm_kernels.configs import lookup
from replayssm_kernels.inspect_codegen import generated_source
plan = sorted(glob.glob("results/bench/history/*/variants_cache_hints.json"))[-1]
found = []
for sd in ("float32", "bfloat16"):
    entry, _ = lookup("replayssm", "nvidia_h100_80gb_hbm3", sd, "K128-V128-LB16")
    block_v, block_k = entry["block_sizes"]
    extra = {k: v for k, v in entry.items() if k not in ("block_sizes", "num_warps")}
    for variant in json.load(open(plan)):
        src, *_ = generated_source(
            "state", 16, block_v, entry["num_warps"], getattr(torch, sd), "fast", extra=extra | variant, block_k=block_k
        )
        loads = re.findall(r"= tl\\.load\\((\\w+)([^\\n]*)", src)  # (tensor, rest of the line), in order
        marked = [i for i, (_, rest) in enumerate(loads) if "eviction_policy=" in rest]
        stores = [m.group(1) for m in re.finditer(r"tl\\.store\\((\\w+)[^\\n]*cache_modifier='\\.cs'", src)]
        found.append([sd, json.dumps(variant), [t for t, _ in loads], marked, stores])
print(json.dumps(found))
"""


def test_cache_hint_plan_marks_the_loads_it_names():
    """Run 32's isolated-profile plan (``variants_cache_hints.json``) names Helion's loads and stores by
    position: in the H100 table's L=16 entries (both state dtypes) the eviction policy must land on the
    checkpoint's load in the state launch's K loop (the first of two) and the streaming store on the flush's
    checkpoint store, and nowhere else. Generated code, so outside Helion's interpreter."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("HELION_INTERPRET", "TRITON_INTERPRET")}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run(
        [sys.executable, "-c", _CACHE_HINTS], capture_output=True, text=True, env=env, timeout=300, cwd=root
    )
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout.splitlines()[-1])
    assert len(found) == 6
    for sd, variant, loads, marked, stores in found:
        assert loads.count("initial_state") == 2, loads  # the K loop's read, then the flush's re-read
        if "load_eviction_policies" in variant:
            assert marked == [loads.index("initial_state")] and stores == [], (sd, variant, loads, marked, stores)
        else:
            assert marked == [] and stores == ["initial_state"], (sd, variant, loads, marked, stores)


@pytest.mark.parametrize(
    "variant",
    [dict(lower_bound=-5.0), dict(lower_bound=0.0), dict(use_qk_l2norm=False), dict(cache_dtype=torch.bfloat16)],
)
def test_replayssm_kernel_variants(variant):
    p = Problem(3, 2, 4, 16, 16, 4)
    r = run_sequence(
        p, steps=11, replay_fn=helion_fused_recurrent_kda_replayssm_decode, state_dtype=torch.float32,
        device=DEVICE, seed=7, **variant,
    )  # fmt: skip
    tol = 1e-2 if "cache_dtype" in variant else 1e-5
    assert r.max_rel <= tol and not r.nonfinite and r.untouched_ok


@pytest.mark.parametrize("p", GRID[:3], ids=Problem.label)
def test_standard_kernel_matches_reference(p):
    r = run_sequence(
        p, steps=4, standard=True, replay_fn=helion_fused_recurrent_kda_packed_decode, state_dtype=torch.float32,
        device=DEVICE, seed=1,
    )  # fmt: skip
    assert r.max_rel <= 1e-5 and not r.nonfinite and r.untouched_ok


@pytest.mark.parametrize("launches", [None, 0], ids=["default", "standard"])
def test_ring_of_one_runs_the_standard_kernel(launches):
    """At L = 1 every step flushes from an empty ring, so ``launches=None`` (and ``0``) is one standard
    launch on the checkpoint: it matches the float64 reference, stale (NaN) rings are never read and
    nothing in them changes; ``0`` is refused for a longer ring, whose rows do not flush every step."""
    from replayssm_kernels import bench
    from replayssm_kernels import kda_decode as kd

    p = Problem(4, 2, 4, 16, 32, 1)  # GQA, K != V
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=launches)
    r = run_sequence(p, steps=4, replay_fn=fn, state_dtype=torch.float32, device=DEVICE, p_force=0.5, seed=7)
    assert r.max_rel <= 1e-5 and not r.nonfinite and r.untouched_ok and r.natural_flushes > 0

    for L, names in ((1, ["standard"]), (2, ["ring_weights", "state"])):
        work = bench.Workload(bench.Case(4, 2, 2, 16, 16, L, "float32", "float32"), 1, DEVICE)
        w, (mixed, a, b) = work.weights, work.tokens[0]
        args = (mixed, a, b, w.A_log, w.dt_bias, w.scale, work.state, work.d_cache, work.k_cache, work.g_cache)
        rest = (work.out, work.indices[0], work.cursors[0], None, True)
        assert [x.name for x in kd.replayssm_launches(*args, *rest, launches=launches if L == 1 else 2)] == names
    with pytest.raises(ValueError, match=r"`launches=0` runs the standard decode kernel.*cache_length 2"):
        kd.replayssm_launches(*args, *rest, launches=0)


def test_kernel_rejects_what_it_does_not_support():
    p = Problem(2, 1, 1, 16, 16, 2)
    with pytest.raises(ValueError, match=r"`initial_state` must have dtype float32, bfloat16 or float16"):
        run_sequence(p, steps=1, replay_fn=helion_fused_recurrent_kda_replayssm_decode, state_dtype=torch.float64)
    with pytest.raises(ValueError, match=r"`precision` must be one of"):
        run_sequence(
            p, steps=1, replay_fn=functools.partial(helion_fused_recurrent_kda_replayssm_decode, precision="tf32"),
            state_dtype=torch.float32,
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"`launches` must be 1 \(one fused launch\), 2 .* or 3"):
        run_sequence(
            p, steps=1, replay_fn=functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=4),
            state_dtype=torch.float32,
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"`g_cache` must have shape .*value_dim, but the gate shares key_dim"):
        q = Problem(2, 1, 1, 16, 32, 2)
        from replayssm_ref.harness import random_token, random_weights

        gen = torch.Generator().manual_seed(0)
        w = random_weights(q, gen, "cpu")
        mixed, a, b = random_token(q, gen, "cpu", torch.float32)
        helion_fused_recurrent_kda_replayssm_decode(
            mixed, a, b, w.A_log, w.dt_bias, w.scale, torch.zeros(4, 1, 32, 16), torch.zeros(4, 1, 2, 32),
            torch.zeros(4, 1, 2, 16), torch.zeros(4, 1, 2, 32), torch.zeros(2, 1, 1, 32),
            torch.tensor([0, 1], dtype=torch.int32), torch.zeros(2, dtype=torch.int32),
        )  # fmt: skip


@pytest.mark.parametrize(
    "p,state_dtype,out_dtype",
    [
        (Problem(2, 1, 2, 64, 256, 3), torch.float16, torch.float32),
        (Problem(2, 2, 2, 256, 16, 2), torch.bfloat16, torch.bfloat16),
    ],
    ids=["fp16-state-K64-V256-fp32-out", "bf16-state-K256-V16"],
)
def test_kernel_dtypes_and_dimension_range(p, state_dtype, out_dtype):
    r = run_sequence(
        p, steps=2 * p.cache_length + 2, replay_fn=helion_fused_recurrent_kda_replayssm_decode,
        state_dtype=state_dtype, cache_dtype=torch.bfloat16, input_dtype=torch.bfloat16, out_dtype=out_dtype,
        device=DEVICE, p_force=0.3, seed=5,
    )  # fmt: skip
    assert r.max_rel <= 3e-2 and not r.nonfinite and r.untouched_ok


@pytest.mark.parametrize("launches", [2, 3, 1], ids=["two_launch", "split", "fused"])
def test_long_ring_L128(launches):
    p = Problem(2, 1, 2, 16, 16, 128)
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, launches=launches)
    r = run_sequence(
        p, steps=130, replay_fn=fn, state_dtype=torch.float32,
        device=DEVICE, p_force=0.0, p_pad=0.0, seed=3,
    )  # fmt: skip
    assert r.natural_flushes > 0 and r.max_rel <= 1e-5 and not r.nonfinite and r.untouched_ok


def test_strided_views_match_the_reference():
    """Padded slot stride for the state, strided mixed_qkv rows, ring views at an offset: the kernel
    reads and writes through the views and leaves the padding around them untouched."""
    from replayssm_ref import ReplaySSMCache, replayssm_decode_step
    from replayssm_ref.harness import random_token, random_weights

    p = Problem(3, 2, 4, 16, 32, 3)
    gen = torch.Generator().manual_seed(11)
    w = random_weights(p, gen, DEVICE)
    mixed, a, b = random_token(p, gen, DEVICE, torch.float32)
    wide = torch.full((p.batch, p.qkv_width + 8), float("nan"), device=DEVICE)
    wide[:, 5 : 5 + p.qkv_width] = mixed
    big = torch.full((p.num_slots, p.num_v_heads + 1, p.value_dim, p.key_dim), 1e30, device=DEVICE)
    big[:, 1:] = torch.randn(p.num_slots, p.num_v_heads, p.value_dim, p.key_dim, generator=gen).to(DEVICE)
    cache = ReplaySSMCache.allocate(
        num_slots=p.num_slots + 1, batch=p.batch, num_q_heads=p.num_q_heads, num_v_heads=p.num_v_heads,
        key_dim=p.key_dim, value_dim=p.value_dim, cache_length=p.cache_length, cache_dtype=torch.float32,
        device=DEVICE,
    )  # fmt: skip
    for t in (cache.d_cache, cache.k_cache):
        t[:, :, :2] = torch.randn(t[:, :, :2].shape, generator=gen).to(DEVICE) * 0.3
    cache.g_cache[:, :, :2] = -torch.rand(cache.g_cache[:, :, :2].shape, generator=gen).to(DEVICE)
    rings = [t[1:] for t in (cache.d_cache, cache.k_cache, cache.g_cache)]  # views at an offset
    wp = torch.tensor([0, 2, 1], dtype=torch.int32, device=DEVICE)
    idx = torch.tensor([3, 0, 4], dtype=torch.int32, device=DEVICE)
    force = torch.tensor([0, 0, 1], dtype=torch.int32, device=DEVICE)
    ref_state, ref_rings = big[:, 1:].double(), [r.double() for r in rings]
    ref_out = torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, dtype=torch.float64, device=DEVICE)
    replayssm_decode_step(
        mixed.double(), a.double(), b.double(), w.A_log.double(), w.dt_bias.double(), w.scale, ref_state,
        *ref_rings, ref_out, idx, wp, force, True,
    )  # fmt: skip
    out = torch.full((p.batch, 1, p.num_v_heads, p.value_dim), float("nan"), device=DEVICE)
    state = big[:, 1:]
    helion_fused_recurrent_kda_replayssm_decode(
        wide[:, 5 : 5 + p.qkv_width], a, b, w.A_log, w.dt_bias, w.scale, state, *rings, out, idx, wp, force, True
    )
    torch.testing.assert_close(out.double(), ref_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(state.double(), ref_state, rtol=1e-5, atol=1e-5)
    for got, want in zip(rings, ref_rings, strict=True):
        torch.testing.assert_close(got.double().nan_to_num(7.0), want.nan_to_num(7.0), rtol=1e-6, atol=1e-6)
    assert (big[:, 0] == 1e30).all()


def test_isolated_profile_cursor_modes(monkeypatch):
    """``profile_launches --isolated``: the cursor modes do what they say (no row flushes: no checkpoint
    changes; every row flushes: every checkpoint of the timed slots is rewritten), each launch of the
    step is timed on its own, and ``extra`` reaches the plan (a flush-rows launch, or another design)."""
    from replayssm_kernels import bench
    from replayssm_kernels.profile_launches import isolated_times

    timed = []

    def fake_time_graph(launches, **kw):  # records what one graph would hold; no CUDA here
        # a Launch, or a whole step: functools.partial(run_launches, plan)
        timed.append(set().union(*({f.name} if hasattr(f, "name") else {x.name for x in f.args[0]} for f in launches)))
        return 1.0, 1.0, 1.0

    monkeypatch.setattr(bench, "time_graph", fake_time_graph)
    case = bench.Case(4, 2, 2, 16, 16, 8, "float32", "float32")  # L=8: three launches by default
    work = bench.Workload(case, 2, DEVICE)
    slots = torch.cat(work.indices).long()
    before = work.state[slots].clone()
    assert set(isolated_times(work, "none")) == {"ring_weights", "state", "flush", "step"}
    assert torch.equal(work.state[slots], before)
    assert timed[:3] == [{"ring_weights"}, {"state"}, {"flush"}] and timed[3] == {"ring_weights", "state", "flush"}
    isolated_times(work, "all")
    assert (work.state[slots] != before).flatten(1).all(1).all()  # every slot's checkpoint rewritten
    extra = {"block_sizes": [16, 16], "flush_block_k": 16, "flush_tiles": 16, "flush_programs": 3}
    assert "flush_rows" in isolated_times(work, "steady", extra=extra)
    # "launches" picks another design (its own table entry); the caller's dict is left as it was
    other = {"launches": 2}
    assert set(isolated_times(work, "none", extra=other)) == {"ring_weights", "state", "step"}
    assert other == {"launches": 2}
    assert set(isolated_times(work, "none", extra=other | {"num_warps": 1})) == {"ring_weights", "state", "step"}


def test_flush_rows_launch_only_up_to_its_batch_limit(monkeypatch):
    """The flush-rows launch holds the batch's flags in every program, so past FLUSH_ROWS_MAX_BATCH a
    split step keeps the per-row flush launch (and precise mode always does)."""
    from replayssm_kernels import bench
    from replayssm_kernels import kda_decode as kd

    work = bench.Workload(bench.Case(4, 2, 2, 16, 16, 8, "float32", "float32"), 1, DEVICE)
    w, (mixed, a, b) = work.weights, work.tokens[0]
    config = {"block_sizes": [16, 16], "flush_block_k": 16, "flush_tiles": 16, "flush_programs": 3}

    def last_launch(precision="fast"):
        plan = kd.replayssm_launches(
            mixed, a, b, w.A_log, w.dt_bias, w.scale, work.state, work.d_cache, work.k_cache, work.g_cache,
            work.out, work.indices[0], work.cursors[0], None, True, precision=precision, launches=3, config=config,
        )  # fmt: skip
        return plan[-1].name

    assert last_launch() == "flush_rows" and last_launch("precise") == "flush"
    config["flush_overlap"] = 2  # beside the state launch only where the flush-rows launch runs
    assert last_launch() == "flush_rows" and last_launch("precise") == "flush"
    monkeypatch.setattr(kd, "FLUSH_ROWS_MAX_BATCH", 3)
    assert last_launch() == "flush"


def test_launch_groups_pair_a_beside_launch_with_the_one_ahead():
    """``run_launches``'s schedule: every launch runs exactly once; with concurrency (CUDA) a launch
    marked ``beside`` is grouped with the one ahead of it, started first; off CUDA all run in order.
    And the plans: with ``flush_overlap`` the flush-rows launch is marked (its priority) and the
    state launch skips flush rows (SKIP_FLUSH, its last argument); without it neither."""
    from replayssm_kernels import bench
    from replayssm_kernels import kda_decode as kd

    a, b, c = (kd.Launch(name, None, None, (), beside) for name, beside in (("a", 0), ("b", 0), ("c", 2)))
    assert kd.launch_groups([a, b, c], concurrent=True) == [(a,), (c, b)]
    assert kd.launch_groups([a, b, c], concurrent=False) == [(a,), (b,), (c,)]
    assert kd.launch_groups([a, b], concurrent=True) == [(a,), (b,)]

    work = bench.Workload(bench.Case(4, 2, 2, 16, 16, 16, "float32", "float32"), 1, DEVICE)
    w, (mixed, x, y) = work.weights, work.tokens[0]
    for overlap in (0, 1, 2):
        config = {"block_sizes": [16, 16], "flush_block_k": 16, "flush_tiles": 16, "flush_programs": 3, "flush_keep": 1}
        plan = kd.replayssm_launches(
            mixed, x, y, w.A_log, w.dt_bias, w.scale, work.state, work.d_cache, work.k_cache, work.g_cache,
            work.out, work.indices[0], work.cursors[0], None, True, launches=3,
            config=config | {"flush_overlap": overlap},
        )  # fmt: skip
        assert [(p.name, p.beside) for p in plan] == [("ring_weights", 0), ("state", 0), ("flush_rows", overlap)]
        assert plan[1].args[-3] is bool(overlap)  # SKIP_FLUSH
        # HAND_W and KEEP: only a two-launch state launch flushes (flush_keep is set, and left off here)
        assert plan[1].args[-2:] == (False, False)
        # OWN, HAND_W (both launches), and ONE (it needs HAND_W too: off here, though flush_block_k = K)
        assert plan[2].args[-3:] == (bool(overlap), False, False) and plan[0].args[-2] is False
        assert plan[0].args[-1] == 1  # RH: launch 1's heads per program (prep_heads)


def test_tune_never_tables_a_config_that_misses_the_reference():
    """``tune`` checks every ReplaySSM candidate against the float64 recurrence before it may enter the
    table: a correct config passes, a decode whose outputs are 1% off does not."""
    from replayssm_kernels import bench, tune

    case = bench.Case(4, 2, 4, 16, 16, 4, "float32", "bfloat16")
    config = {
        "block_sizes": [16, 16], "num_warps": 1, "num_stages": 1, "flush_block_k": 16, "flush_tiles": 16,
        "flush_programs": 3, "flush_overlap": 2, "flush_weights": 1, "flush_stages": 3,
    }  # fmt: skip

    def one_percent_off(*args, **kwargs):
        out, state = helion_fused_recurrent_kda_replayssm_decode(*args, **kwargs)
        return out.mul_(1.01), state

    tol = tune.tolerance("float32", "bfloat16", "fast")
    assert tune.check_candidate("replayssm_helion_split", config, case, DEVICE) <= tol
    assert tune.check_candidate("replayssm_helion_split", config, case, DEVICE, one_percent_off) > tol


def test_programs_per_sm_follows_the_occupancy_rules():
    """The residency ``tune`` records beside each device register count (H100 limits): registers are
    allocated 8 a thread at a time, so 126 holds as many programs as 128 and 157 as 160; the 32-program
    cap and shared memory (1 KB reserved a program) bind where registers do not."""
    from types import SimpleNamespace

    from replayssm_kernels.inspect_codegen import programs_per_sm

    h100 = SimpleNamespace(
        regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, shared_memory_per_multiprocessor=233472
    )
    for registers, warps, shared, want in [
        (128, 2, 17408, 8),  # the fp32 L=16 entry's residency under maxnreg 128 (run 36)
        (126, 2, 17408, 8),
        (157, 2, 17408, 6),  # the same launch uncapped (offline)
        (96, 2, 0, 10),
        (100, 2, 0, 9),  # 104 allocated: 9 (10 if registers were not rounded up)
        (32, 1, 0, 32),  # one-warp launch 1: the per-SM program cap
        (64, 16, 0, 2),  # warps: 2048 threads
        (32, 1, 100000, 2),  # shared memory
    ]:
        assert programs_per_sm(registers, warps, shared, h100) == want, (registers, warps, shared)


def test_device_resources_is_empty_off_cuda():
    """On the CPU nothing is compiled for a GPU, so ``tune``'s register columns are simply absent; the
    plan they are read from is the step ``Workload.steps`` times (same launches, same configs)."""
    from replayssm_kernels import bench
    from replayssm_kernels.inspect_codegen import device_resources

    work = bench.Workload(bench.Case(4, 2, 4, 16, 16, 4, "float32", "bfloat16"), sets=1, device=torch.device("cpu"))
    config = {"block_sizes": [16, 16], "num_warps": 1, "num_stages": 1, "prep_warps": 1}
    plan = work.plan("replayssm_helion_two_launch", "fast", config=config)
    assert [launch.name for launch in plan] == ["ring_weights", "state"]
    assert [device_resources(launch) for launch in plan] == [{}, {}]
    (standard,) = work.plan("standard_helion", "fast", config={"block_sizes": [16], "num_warps": 1})
    assert standard.name == "standard" and device_resources(standard) == {}
