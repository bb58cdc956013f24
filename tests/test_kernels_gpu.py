"""GPU-only kernel tests (marker ``gpu``; skipped without CUDA): ``python -m pytest -m gpu``.

Every comparison is the harness's: per (row, value head) against the float64 oracle, with the
tolerance of the dtypes and step count (``replayssm_ref.harness.tolerance``), every untouched byte
bit-exact, stale ring positions re-poisoned with NaN before every step."""

from __future__ import annotations

import functools
import itertools

import pytest
import torch
from cases import DESIGNS, SCALAR_DESIGNS

from replayssm_kernels import (
    helion_fused_recurrent_gdn_packed_decode,
    helion_fused_recurrent_gdn_replayssm_decode,
    helion_fused_recurrent_kda_packed_decode,
    helion_fused_recurrent_kda_replayssm_decode,
)
from replayssm_kernels.plan import plan_replayssm
from replayssm_ref import ReplaySSMCache
from replayssm_ref.harness import (
    Problem,
    gate_args,
    head_errors,
    random_token,
    random_weights,
    reference_steps,
    run_sequence,
    same_bits,
    tolerance,
)  # fmt: skip

pytestmark = pytest.mark.gpu
BF16 = torch.bfloat16


def _check(p, state_dtype, steps, **kw):
    r = run_sequence(
        p, steps=steps, state_dtype=state_dtype, cache_dtype=BF16, input_dtype=BF16, out_dtype=BF16, device="cuda",
        p_force=0.2, seed=p.cache_length, warm=True, **kw,
    )  # fmt: skip
    assert not r.nonfinite and r.untouched_ok, r.problems
    assert r.max_rel <= tolerance(state_dtype, BF16, steps=steps), (r.out_rel, r.state_rel, r.ring_rel)
    return r


DTYPES = pytest.mark.parametrize("state_dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])


@DTYPES
@pytest.mark.parametrize("L", [1, 4, 16, 64])
@pytest.mark.parametrize("hv,gqa", list(itertools.product([4, 32], [1, 2])))
def test_default_design_matches_float64(hv, gqa, L, state_dtype):
    """The default design (the device table's choice of two or three launches; the standard kernel at
    L = 1) over the head counts, GQA ratios and ring lengths of the sweep, K = V = 128."""
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, check_values=True)
    _check(Problem(8, hv // gqa, hv, 128, 128, L), state_dtype, steps=min(3 * L + 2, 20), replay_fn=fn)


# the designs of tests/cases.py, at K = V = 128 with the GPU tables' tile sizes
FULL = {"block_sizes": [64, 32], "num_warps": 2, "num_stages": 1, "k_stages": 3}
GPU_DESIGNS = {
    name: (launches, None if cfg is None else cfg | FULL | {"flush_block_k": 32 if "flush_tiles" not in cfg else 16})
    for name, (launches, cfg) in (DESIGNS | SCALAR_DESIGNS).items()
}
KDA_RAW_DESIGNS = [d for d in GPU_DESIGNS if d not in SCALAR_DESIGNS]  # the one launch needs GDN or predecayed


@DTYPES
@pytest.mark.parametrize("L", [4, 40])
@pytest.mark.parametrize("design", KDA_RAW_DESIGNS)
def test_each_design_matches_float64(design, L, state_dtype):
    launches, config = GPU_DESIGNS[design]
    fn = functools.partial(
        helion_fused_recurrent_kda_replayssm_decode, launches=launches, config=config, check_values=True
    )
    r = _check(Problem(8, 16, 32, 128, 128, L), state_dtype, steps=12, replay_fn=fn)
    assert r.natural_flushes > 0 and r.forced_flushes > 0


@DTYPES
@pytest.mark.parametrize("L", [4, 8, 16])
@pytest.mark.parametrize("ring_format", ["predecayed"])
@pytest.mark.parametrize("gqa", [1, 2])
def test_ring_formats_match_float64(ring_format, L, state_dtype, gqa):
    """Each ring format under the default design (the tuned table), bounded gate, K = V = 128."""
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, check_values=True)
    _check(
        Problem(8, 32 // gqa, 32, 128, 128, L), state_dtype, steps=min(3 * L + 2, 20), replay_fn=fn,
        lower_bound=-5.0, ring_format=ring_format,
    )  # fmt: skip


@DTYPES
@pytest.mark.parametrize(("L", "lower_bound"), [(4, -5.0), (16, -5.0), (40, -2.0)])  # (L - 1) |bound| <= 80
@pytest.mark.parametrize("design", ["two_tiles", "fused"])
def test_predecayed_designs_match_float64(design, L, lower_bound, state_dtype):
    """The predecayed format in two launches and in one, GQA 2, K = V = 128, bounded gate (L = 40: rings
    of several tiles)."""
    launches, config = GPU_DESIGNS[design]
    fn = functools.partial(
        helion_fused_recurrent_kda_replayssm_decode, launches=launches, config=config, check_values=True
    )
    r = _check(
        Problem(8, 16, 32, 128, 128, L), state_dtype, steps=12, replay_fn=fn, lower_bound=lower_bound,
        ring_format="predecayed",
    )  # fmt: skip
    assert r.natural_flushes > 0 and r.forced_flushes > 0


@DTYPES
@pytest.mark.parametrize("L", [1, 4, 16, 64])
@pytest.mark.parametrize("h,hv", [(16, 32), (32, 32), (2, 4)])
def test_gdn_default_design_matches_float64(h, hv, L, state_dtype):
    """Gated DeltaNet (Qwen3-Next's H = 16, HV = 32 first) under the default design, K = V = 128."""
    fn = functools.partial(helion_fused_recurrent_gdn_replayssm_decode, check_values=True)
    _check(Problem(8, h, hv, 128, 128, L), state_dtype, steps=min(3 * L + 2, 20), replay_fn=fn, gate="gdn")


@pytest.mark.parametrize("L", [4, 40])
@pytest.mark.parametrize("design", list(GPU_DESIGNS))
def test_gdn_each_design_matches_float64(design, L):
    launches, config = GPU_DESIGNS[design]
    fn = functools.partial(
        helion_fused_recurrent_gdn_replayssm_decode, launches=launches, config=config, check_values=True
    )
    r = _check(Problem(8, 16, 32, 128, 128, L), torch.float32, steps=12, replay_fn=fn, gate="gdn")
    assert r.natural_flushes > 0 and r.forced_flushes > 0


@pytest.mark.parametrize("gate", ["kda", "gdn"])
def test_standard_matches_float64(gate):
    fn = helion_fused_recurrent_gdn_packed_decode if gate == "gdn" else helion_fused_recurrent_kda_packed_decode
    for sd in (torch.float32, torch.bfloat16):
        r = run_sequence(
            Problem(8, 16, 32, 128, 128, 1), steps=8, replay_fn=fn, standard=True, state_dtype=sd, input_dtype=BF16,
            out_dtype=BF16, device="cuda", gate=gate,
        )  # fmt: skip
        assert not r.nonfinite and r.untouched_ok and r.max_rel <= tolerance(sd, BF16, steps=8), r.problems


@pytest.mark.parametrize("design", KDA_RAW_DESIGNS)
def test_corrupted_cursor_or_slot_touches_nothing_on_the_gpu(design):
    """Cursors L + 2, -3 and 2**20 and a slot past the pool behave as padding rows: zero output, and
    every other slot's state and rings bit-exact (compared with the same step without those rows)."""
    launches, config = GPU_DESIGNS[design]
    p = Problem(8, 2, 4, 128, 128, 4, spare_slots=4)
    gen = torch.Generator().manual_seed(1)
    w = random_weights(p, gen, "cuda")
    mixed, a, b = random_token(p, gen, "cuda", BF16)
    S = torch.randn(p.num_slots, 4, 128, 128, device="cuda")
    rings = [torch.randn(p.num_slots, h, 4, 128, device="cuda") for h in (4, 2, 4)]
    rings[2] = -rings[2].abs()
    idx = torch.arange(p.batch, device="cuda", dtype=torch.int32)
    wp = torch.tensor([0, 1, 2, 3, 1, 2, 0, 3], device="cuda", dtype=torch.int32)
    bad_wp, bad_idx = wp.clone(), idx.clone()
    bad_wp[:3] = torch.tensor([6, -3, 1 << 20])
    bad_idx[3] = p.num_slots + 100
    pad_idx = idx.clone()
    pad_idx[:4] = -1
    outs = []
    for i, w_ in ((pad_idx, wp), (bad_idx, bad_wp)):
        state, rr = S.clone(), [r.clone() for r in rings]
        out = torch.full((p.batch, 1, 4, 128), float("nan"), device="cuda")
        helion_fused_recurrent_kda_replayssm_decode(
            mixed, a, b, w.A_log, w.dt_bias, w.scale, state, *rr, out, i, w_, None, True, None,
            launches=launches, config=config, check_values=False,
        )  # fmt: skip
        outs.append((state, *rr, out))
    torch.cuda.synchronize()
    assert (outs[1][-1][:4] == 0).all()
    for x, y in zip(*outs, strict=True):
        assert same_bits(x, y)


@pytest.mark.parametrize(
    ("design", "gate"),
    [
        *itertools.product(["two_walk", "two_tiles", "split_rows_walk", "split_overlap"], ["kda", "gdn"]),
        ("fused", "gdn"),
    ],
)
def test_cuda_graph_replay_with_device_side_cursor_and_flush_changes(design, gate):
    """Capture one step, then change write_pos / force_flush in place between replays: each replay
    must equal an eager float64 reference step with the new values, per (row, head), in the output,
    the checkpoint and all three rings (strided state slots included; the gap stays untouched)."""
    launches, config = GPU_DESIGNS[design]
    p = Problem(6, 2, 4, 128, 128, 4, spare_slots=3)
    dev = "cuda"
    gen = torch.Generator().manual_seed(0)
    w = random_weights(p, gen, dev, torch.float32, gate=gate)
    mixed, a, b = random_token(p, gen, dev, BF16, gate=gate)
    buf = torch.randn(p.num_slots, p.num_v_heads + 1, p.value_dim, p.key_dim, device=dev) * 0.3
    state = buf[:, 1:]  # a padded slot stride
    cache = ReplaySSMCache.allocate(
        num_slots=p.num_slots, batch=p.batch, num_q_heads=p.num_q_heads, num_v_heads=p.num_v_heads,
        key_dim=p.key_dim, value_dim=p.value_dim, cache_length=p.cache_length, cache_dtype=torch.float32, device=dev,
        gate=gate,
    )  # fmt: skip
    rings = (cache.d_cache, cache.k_cache, cache.g_cache)
    fn = helion_fused_recurrent_gdn_replayssm_decode if gate == "gdn" else helion_fused_recurrent_kda_replayssm_decode
    tail = gate_args(True, None, gate)
    cache.d_cache.normal_(0, 0.1)
    cache.k_cache.normal_(0, 0.1)
    cache.g_cache.uniform_(-0.2, 0)
    idx = torch.tensor([0, 2, -1, 4, 5, 7], device=dev, dtype=torch.int32)
    force = torch.zeros(p.batch, device=dev, dtype=torch.int32)
    out = torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, device=dev, dtype=torch.float32)
    call = functools.partial(
        fn, mixed, a, b, w.A_log, w.dt_bias, w.scale, state, *rings, out, idx, cache.write_pos, force, *tail,
        check_values=False, launches=launches, config=config,
    )  # fmt: skip
    plan_args = (*call.args[:15], None) if gate == "gdn" else call.args
    names = {x.name for x in plan_replayssm(*plan_args, **call.keywords, gate=gate)}
    assert names == {"fused"} if launches == 1 else names >= {"ring_weights", "state"}
    snapshot = [t.clone() for t in (buf, *rings)]
    call()  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for wp, ff in [([0, 1, 2, 3, 0, 2], [0] * 6), ([3, 0, 1, 2, 1, 3], [0, 1, 0, 0, -1, 0]), ([2] * 6, [1] * 6)]:
        for t, s in zip((buf, *rings), snapshot, strict=True):
            t.copy_(s)
        cache.write_pos.copy_(torch.tensor(wp, dtype=torch.int32))
        force.copy_(torch.tensor(ff, dtype=torch.int32))
        ref = [state.double().clone(), *(r.double().clone() for r in rings)]
        ref_out = torch.empty_like(out, dtype=torch.float64)
        reference_steps(gate)[1](
            mixed.double(), a.double(), b.double(), w.A_log.double(), w.dt_bias.double(), w.scale, ref[0], *ref[1:],
            ref_out, idx, cache.write_pos, force, *tail,
        )  # fmt: skip
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        for got, want in zip((out, state, *rings), (ref_out, *ref), strict=True):
            rel, _ = head_errors(got.nan_to_num(1e30), want.nan_to_num(1e30))
            assert rel < 1e-4, (wp, ff, rel)
        assert same_bits(buf[:, 0], snapshot[0][:, 0])  # the gap of the strided buffer


# ---- speculative decoding ------------------------------------------------------------------------------


@DTYPES
@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
@pytest.mark.parametrize(("T", "L"), [(4, 16), (8, 8), (2, 5)])
def test_spec_rounds_match_float64(T, L, tree, state_dtype):
    """Verify + commit rounds (the default tables), K = V = 128, H = 16, HV = 32, bf16 rings and inputs."""
    from replayssm_kernels.spec import helion_kda_replayssm_spec_commit, helion_kda_replayssm_spec_verify
    from replayssm_ref.spec_harness import run_spec_rounds

    r = run_spec_rounds(
        Problem(8, 16, 32, 128, 128, L), num_drafts=T, rounds=10, tree=tree, seed=T, p_force=0.2,
        verify_fn=helion_kda_replayssm_spec_verify, commit_fn=helion_kda_replayssm_spec_commit,
        state_dtype=state_dtype, cache_dtype=BF16, device="cuda",
    )  # fmt: skip
    assert not r.nonfinite and r.untouched_ok and r.cursors_ok, r.problems
    assert r.max_rel <= tolerance(state_dtype, BF16, steps=10 * T), (r.out_rel, r.state_rel)


class GraphedRounds:
    """``verify_fn`` / ``commit_fn`` for ``run_spec_rounds`` that replay CUDA graphs captured at the first
    round: each round's drafts, padding, accept counts, paths and forced flushes are copied into the
    graphs' input buffers on the device; nothing else changes between replays."""

    def __init__(self):
        self.verify_graph = self.commit_graph = None

    def verify(self, mixed, a, b, A_log, dt_bias, scale, S, d, k, g, out, idx, wp, parents, l2, lb):
        from replayssm_kernels.spec import helion_kda_replayssm_spec_verify as verify

        fresh = (mixed, a, b, idx, parents)
        if self.verify_graph is None:
            self.v_in, self.v_out = [x.clone() for x in fresh], out.clone()
            m, a_, b_, i_, p_ = self.v_in

            def call():
                verify(m, a_, b_, A_log, dt_bias, scale, S, d, k, g, self.v_out, i_, wp, p_, l2, lb, check_values=False)

            call()  # compiles; writes what the replay below writes again
            torch.cuda.synchronize()
            self.verify_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.verify_graph):
                call()
        for buf, x in zip(self.v_in, fresh, strict=True):
            buf.copy_(x)
        self.verify_graph.replay()
        out.copy_(self.v_out)

    def commit(self, S, d, k, g, idx, wp, n, nodes, force, *, num_drafts):
        from replayssm_kernels.spec import helion_kda_replayssm_spec_commit as commit

        fresh = (idx, n, force) + ((nodes,) if nodes is not None else ())
        if self.commit_graph is None:
            self.c_in = [x.clone() for x in fresh]
            i_, n_, f_, *nd = self.c_in
            scratch = [x.clone() for x in (S, d, k, g, wp)]  # compile on copies: a commit is not idempotent
            commit(*scratch[:4], i_, scratch[4], n_, nd[0] if nd else None, f_, num_drafts=num_drafts,
                   check_values=False)  # fmt: skip
            torch.cuda.synchronize()
            self.commit_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.commit_graph):
                commit(S, d, k, g, i_, wp, n_, nd[0] if nd else None, f_, num_drafts=num_drafts, check_values=False)
        for buf, x in zip(self.c_in, fresh, strict=True):
            buf.copy_(x)
        self.commit_graph.replay()


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
def test_spec_cuda_graph_replays_100_rounds(tree):
    """100 rounds of verify + commit replayed from CUDA graphs, with random accept counts, paths,
    padding and forced flushes as device tensors, against single-token float64 decode steps."""
    from replayssm_ref.spec_harness import run_spec_rounds

    graphs = GraphedRounds()
    r = run_spec_rounds(
        Problem(6, 2, 4, 128, 128, 8), num_drafts=3, rounds=100, tree=tree, seed=11, p_force=0.1,
        verify_fn=graphs.verify, commit_fn=graphs.commit, state_dtype=torch.float32, device="cuda",
    )  # fmt: skip
    assert not r.nonfinite and r.untouched_ok and r.cursors_ok, r.problems
    assert r.state_rel <= 1e-5, r.state_rel  # committed states: the bound for fp32
    assert r.out_rel <= tolerance(torch.float32, steps=300), r.out_rel
    assert r.folds > 10 and r.accepted > 100
