"""Helion kernels against the float64 reference through Helion's interpreter (HELION_INTERPRET=1): the
kernel bodies run as eager PyTorch, which checks their logic (indexing, masking, flush and append
paths) without a GPU. Without the variable (and without a GPU) these tests skip."""

from __future__ import annotations

import functools
import os

import pytest
import torch
from cases import DESIGNS, SCALAR_DESIGNS, check_corrupted_rows, check_sequence, design_fn, step_args

from replayssm_kernels import (
    helion_fused_recurrent_gdn_packed_decode,
    helion_fused_recurrent_gdn_replayssm_decode,
    helion_fused_recurrent_kda_packed_decode,
    helion_fused_recurrent_kda_replayssm_decode,
)
from replayssm_kernels.plan import plan_replayssm
from replayssm_ref.harness import Problem, run_sequence, same_bits, tolerance

pytestmark = pytest.mark.skipif(
    os.environ.get("HELION_INTERPRET") != "1" and not torch.cuda.is_available(),
    reason="needs HELION_INTERPRET=1 (CPU) or a GPU",
)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# L = 3: not a power of two; L = 8: a ring of one tile; L = 20: a ring longer than one tile (the state
# launch's loop over d tiles, two flush tiles). GQA 2 and K != V in the first; started warm so that
# every sequence wraps its ring (natural flushes) within its steps.
GRID = [Problem(3, 2, 4, 16, 32, 3), Problem(3, 1, 2, 32, 32, 8), Problem(3, 2, 2, 32, 32, 20)]


@pytest.mark.parametrize("p", GRID, ids=Problem.label)
@pytest.mark.parametrize("design", list(DESIGNS))
def test_design_matches_reference(design, p):
    check_sequence(p, design_fn(design), steps=9, p_force=0.2, seed=p.cache_length, warm=True, device=DEVICE)


@pytest.mark.parametrize("design", [*DESIGNS, *SCALAR_DESIGNS])
def test_predecayed_format_in_each_design(design):
    """Predecayed keys in every flush path (walked, own tiles, launch 1's weights), GQA 2 (keys per value
    head), a bounded gate whose prefix sums reach (L - 1) |lower_bound| = 60."""
    p = Problem(3, 2, 4, 32, 32, 16)
    check_sequence(
        p, design_fn(design), steps=12, p_force=0.2, seed=4, warm=True, lower_bound=-4.0, ring_format="predecayed",
        state_dtype=torch.float32, cache_dtype=torch.bfloat16, device=DEVICE,
    )  # fmt: skip


@pytest.mark.parametrize("p", GRID[::2], ids=Problem.label)
@pytest.mark.parametrize("ring_format", ["predecayed"])
def test_formats_over_ring_lengths(ring_format, p):
    check_sequence(
        p, design_fn("default"), steps=9, p_force=0.2, seed=p.cache_length, warm=True, lower_bound=-3.0,
        ring_format=ring_format, device=DEVICE,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("state", "ring", "out"),
    [
        (torch.bfloat16, torch.bfloat16, torch.bfloat16),
        (torch.float16, torch.float16, torch.float32),
        (torch.float32, torch.bfloat16, torch.bfloat16),
    ],
    ids=["bf16-state", "fp16-state", "fp32-state-bf16-ring"],
)
@pytest.mark.parametrize("design", ["two_tiles", "split_overlap"])
def test_dtypes(design, state, ring, out):
    p = Problem(3, 2, 4, 32, 32, 4)
    check_sequence(
        p, design_fn(design), steps=9, state_dtype=state, cache_dtype=ring, out_dtype=out, p_force=0.2, seed=5,
        warm=True, device=DEVICE,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("lower_bound", "l2norm"), [(-5.0, True), (None, False), (0.0, True)], ids=["bounded", "raw-qk", "zero-decay"]
)
@pytest.mark.parametrize("design", ["two_walk", "split_programs"])
def test_gates_and_normalisation(design, lower_bound, l2norm):
    """The bounded gate (decaying, and lower_bound 0.0: no decay at all), and q/k without l2norm."""
    p = Problem(3, 1, 2, 32, 32, 4)
    check_sequence(
        p, design_fn(design), steps=9, p_force=0.2, seed=7, warm=True, lower_bound=lower_bound,
        use_qk_l2norm=l2norm, device=DEVICE,
    )  # fmt: skip


def test_standard_kernel_matches_reference():
    p = Problem(4, 2, 4, 16, 32, 1)
    r = run_sequence(p, steps=4, replay_fn=helion_fused_recurrent_kda_packed_decode, standard=True,
                     state_dtype=torch.float32, device=DEVICE)  # fmt: skip
    assert not r.nonfinite and r.untouched_ok and r.max_rel <= tolerance(torch.float32, steps=4)


def test_ring_of_one_runs_the_standard_kernel():
    """At L = 1 every step flushes from an empty ring: the default design is the standard kernel on
    the checkpoint, and ``launches=0`` asks for it (and only at L = 1)."""
    p = Problem(4, 2, 4, 16, 16, 1)
    r = run_sequence(p, steps=5, replay_fn=design_fn("default"), state_dtype=torch.float32, p_force=0.3,
                     device=DEVICE)  # fmt: skip
    assert not r.nonfinite and r.untouched_ok and r.max_rel <= tolerance(torch.float32, steps=5)
    assert r.natural_flushes > 0
    args = step_args(Problem(2, 1, 1, 16, 16, 1))
    assert [x.name for x in plan_replayssm(*args)] == ["standard"]
    with pytest.raises(ValueError, match=r"`launches=0` runs the standard decode kernel.*cache_length 2"):
        plan_replayssm(*step_args(Problem(2, 1, 1, 16, 16, 2)), launches=0)
    with pytest.raises(ValueError, match=r"`launches` must be None"):
        plan_replayssm(*args, launches=4)


@pytest.mark.parametrize("gate", ["kda", "gdn"])
def test_long_ring_L128(gate):
    p = Problem(2, 1, 2, 16, 16, 128)
    check_sequence(p, design_fn("default", gate), steps=6, p_force=0.2, seed=1, warm=True, device=DEVICE, gate=gate)


@pytest.mark.parametrize("design", list(DESIGNS))
def test_corrupted_cursor_or_slot_is_padding(design):
    """A row whose cursor is outside [0, L) (L + 2, -3) or whose slot is outside the pool writes
    nothing and gets zero output, as a padding row; ``check_values=True`` raises (cases.py)."""
    check_corrupted_rows(design, Problem(6, 2, 4, 32, 32, 4), device=DEVICE)


def test_strided_views_match_the_reference():
    """Padded row stride of mixed_qkv, padded slot stride of the state, rings as views with offsets."""
    p = Problem(3, 2, 4, 16, 16, 4)

    def fn(mixed, a, b, A_log, dt, scale, S, d, k, g, out, idx, wp, force, l2, lb):
        wide = torch.zeros(mixed.shape[0], mixed.shape[1] + 8, dtype=mixed.dtype, device=mixed.device)
        wide[:, 3 : 3 + mixed.shape[1]] = mixed
        pool = torch.zeros(S.shape[0], S.shape[1] + 1, *S.shape[2:], dtype=S.dtype, device=S.device)
        pool[:, 1:] = S
        rings = []
        for t in (d, k, g):
            big = torch.zeros(t.shape[0] + 1, *t.shape[1:], dtype=t.dtype, device=t.device)
            big[1:] = t
            rings.append(big[1:])
        res = helion_fused_recurrent_kda_replayssm_decode(
            wide[:, 3 : 3 + mixed.shape[1]], a, b, A_log, dt, scale, pool[:, 1:], *rings, out, idx, wp, force, l2, lb
        )
        S.copy_(pool[:, 1:])
        for t, r in zip((d, k, g), rings, strict=True):
            t.copy_(r)
        return res

    check_sequence(p, fn, steps=7, p_force=0.3, seed=2, warm=True, device=DEVICE)


def test_kernel_off_gpu_without_interpreter_is_one_line(monkeypatch):
    monkeypatch.delenv("HELION_INTERPRET", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    args = [t.cpu() if isinstance(t, torch.Tensor) else t for t in step_args(Problem(2, 1, 1, 16, 16, 4))]
    with pytest.raises(RuntimeError, match="HELION_INTERPRET=1") as e:
        helion_fused_recurrent_kda_replayssm_decode(*args)
    assert "\n" not in str(e.value)


def test_config_conflicts_name_the_option():
    args = step_args(Problem(2, 1, 2, 16, 16, 4))
    call = functools.partial(helion_fused_recurrent_kda_replayssm_decode, *args)
    base = {"block_sizes": [16, 16], "num_warps": 1, "num_stages": 1}
    with pytest.raises(ValueError, match="flush_keep"):
        call(launches=2, config=base | {"flush_keep": 1})  # an option that lost: gone
    with pytest.raises(ValueError, match="flush_programs"):
        call(launches=2, config=base | {"flush_programs": 4, "flush_tiles": 16})  # three launches only
    with pytest.raises(ValueError, match="flush_tiles` and `flush_weights"):
        call(launches=2, config=base | {"flush_tiles": 16})
    with pytest.raises(ValueError, match="flush_overlap"):
        call(launches=3, config=base | {"flush_overlap": 1})
    with pytest.raises(ValueError, match=r"\['flush_tiles'\] are not the one-launch design's"):
        helion_fused_recurrent_gdn_replayssm_decode(
            *step_args(Problem(2, 1, 2, 16, 16, 4), gate="gdn"), launches=1, config=base | {"flush_tiles": 16}
        )  # fmt: skip


def test_default_design_follows_the_device_tables_one_launch_rule(monkeypatch):
    """``launches=None`` runs one launch for the predecayed format up to the table's L, for GDN also up
    to its batch, never for KDA's raw ring; the CPU's table (default.json) has no rule."""
    from replayssm_kernels import plan

    assert plan.default_launches(4, "cpu", predecayed=True) == 2
    monkeypatch.setattr(plan, "one_launch_rule", lambda device: (8, 1))
    pick = functools.partial(plan.default_launches, device="cpu")
    assert [pick(L, predecayed=True) for L in (1, 4, 8)] == [0, 1, 1]
    assert pick(16, predecayed=True) == pick(16) == pick(16, gate="gdn", batch=1) > 1  # the table's 2 or 3
    assert [pick(4, gate="gdn", batch=B) for B in (1, 2)] == [1, 2] and pick(4) == 2
    args = step_args(Problem(1, 2, 4, 16, 16, 4), gate="gdn")
    assert [x.name for x in plan_replayssm(*args, gate="gdn")] == ["fused"]


def test_one_launch_refuses_the_raw_kda_ring_before_writing():
    """``launches=1`` computes each entry's weight in every V tile's program: only where that weight is
    a scalar (GDN) or shared (predecayed). KDA's raw ring is refused, naming the alternatives, and
    nothing is written."""
    args = list(step_args(Problem(3, 1, 2, 16, 16, 4)))
    before = [t.clone() for t in args if isinstance(t, torch.Tensor)]
    with pytest.raises(ValueError, match=r"`launches=1` .*ring_format='predecayed'.*launches=None, 2 or 3"):
        helion_fused_recurrent_kda_replayssm_decode(*args, launches=1)
    assert all(same_bits(x, y) for x, y in zip([t for t in args if isinstance(t, torch.Tensor)], before, strict=True))


def test_overlapped_launches_touch_disjoint_data():
    """``flush_overlap``: the flush-rows launch takes flush rows whole and runs beside the state launch
    on a GPU, so the two must not depend on each other's writes: the step gives the same results with
    the flush-rows launch run first (off CUDA ``run_launches`` runs the state launch first)."""
    launches, config = DESIGNS["split_overlap"]

    def flush_rows_first(*args, **kwargs):
        plan = plan_replayssm(*args, launches=launches, config=config, **kwargs)
        assert [x.name for x in plan] == ["ring_weights", "state", "flush_rows"] and plan[2].beside
        for launch in (plan[0], plan[2], plan[1]):
            launch()

    check_sequence(Problem(3, 2, 4, 32, 32, 4), flush_rows_first, steps=9, p_force=0.2, seed=4, warm=True)


@pytest.mark.parametrize("p", GRID[::2], ids=Problem.label)
@pytest.mark.parametrize("design", [*DESIGNS, *SCALAR_DESIGNS])
def test_gdn_design_matches_reference(design, p):
    """Gated DeltaNet's per-head gate in every design (the same bodies, ``HEAD_GATE``)."""
    check_sequence(
        p, design_fn(design, "gdn"), steps=9, p_force=0.2, seed=p.cache_length, warm=True, gate="gdn", device=DEVICE
    )  # fmt: skip


@pytest.mark.parametrize(("state", "ring"), [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float16)])
def test_gdn_dtypes_and_raw_qk(state, ring):
    p = Problem(3, 2, 4, 32, 32, 4)
    check_sequence(
        p, design_fn("two_tiles", "gdn"), steps=9, state_dtype=state, cache_dtype=ring, p_force=0.2, seed=5,
        warm=True, gate="gdn", use_qk_l2norm=False, device=DEVICE,
    )  # fmt: skip


def test_gdn_standard_kernel_and_ring_of_one():
    p = Problem(4, 2, 4, 16, 32, 1)
    r = run_sequence(p, steps=4, replay_fn=helion_fused_recurrent_gdn_packed_decode, standard=True,
                     state_dtype=torch.float32, gate="gdn", device=DEVICE)  # fmt: skip
    assert not r.nonfinite and r.untouched_ok and r.max_rel <= tolerance(torch.float32, steps=4)
    r = run_sequence(p, steps=5, replay_fn=design_fn("default", "gdn"), state_dtype=torch.float32, p_force=0.3,
                     gate="gdn", device=DEVICE)  # fmt: skip
    assert not r.nonfinite and r.untouched_ok and r.max_rel <= tolerance(torch.float32, steps=5)


@pytest.mark.parametrize("design", ["two_walk", "split_programs", "fused"])
def test_gdn_corrupted_cursor_or_slot_is_padding(design):
    check_corrupted_rows(design, Problem(6, 2, 4, 32, 32, 4), device=DEVICE, gate="gdn")


def test_gdn_kernel_rejects_kda_inputs_before_writing():
    """The kernels share the reference's validation: a KDA gate ring given to the GDN call names the
    layouts, and nothing is written."""
    p = Problem(3, 1, 2, 16, 16, 4)
    args = list(step_args(p, gate="gdn"))
    kda_g = torch.zeros(p.num_slots, p.num_v_heads, p.cache_length, p.key_dim)
    before = [t.clone() for t in args if isinstance(t, torch.Tensor)]
    with pytest.raises(ValueError, match=r"`g_cache` .*Kimi Delta Attention's per-channel gate ring"):
        helion_fused_recurrent_gdn_replayssm_decode(*args[:9], kda_g, *args[10:])
    assert all(same_bits(x, y) for x, y in zip([t for t in args if isinstance(t, torch.Tensor)], before, strict=True))
