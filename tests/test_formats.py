"""Ring formats (``replayssm_ref.formats``) in the reference: each holds the same history as the raw
ring, its caches are allocated and validated by name, and each error says which format expected what."""

from __future__ import annotations

import pytest
import torch

from replayssm_ref import ReplaySSMCache, replayssm_decode_step
from replayssm_ref.formats import MAX_LOG_GROWTH, RING_FORMATS, pick_ring_format
from replayssm_ref.harness import Problem, run_sequence
from replayssm_ref.traffic import TrafficShape, model_speedup

GRID = [
    Problem(4, 1, 1, 16, 16, 2),
    Problem(3, 1, 3, 32, 16, 3),
    Problem(4, 2, 8, 16, 32, 8),
    Problem(3, 1, 2, 16, 16, 17),
]


@pytest.mark.parametrize("p", GRID, ids=Problem.label)
@pytest.mark.parametrize("lower_bound", [-5.0, 0.0], ids=["bounded-5", "bounded0"])
def test_predecayed_ring_equals_the_recurrence_in_float64(p, lower_bound):
    """Predecayed keys and prefix sums hold exactly the raw ring's history: float64 rounding only,
    over wrapping rings, forced flushes, GQA and padding (P grows to (L-1)|lower_bound| = 80 at L = 17)."""
    r = run_sequence(
        p, steps=2 * p.cache_length + 3, p_force=0.2, seed=p.cache_length, lower_bound=lower_bound,
        ring_format="predecayed", check_materialized=True, warm=True,
    )  # fmt: skip
    assert r.max_rel <= 1e-12, (r.out_rel, r.state_rel)
    assert not r.nonfinite and r.untouched_ok, r.problems
    assert r.natural_flushes > 0


def test_predecayed_append_stores_prefix_sums_and_decayed_keys():
    """Two appends then a flush, by hand: g_cache holds P_0 and P_1, k_cache k_i e^{-P_i} per value head,
    and the flush folds them into the same checkpoint as the raw ring does."""
    p, lb = Problem(1, 1, 2, 16, 16, 3), -2.0
    gen = torch.Generator().manual_seed(0)
    from replayssm_ref.harness import random_token, random_weights
    from replayssm_ref.recurrence import prepare_token
    from replayssm_ref.validation import validate_decode_inputs

    w = random_weights(p, gen, "cpu", torch.float64)
    S0 = torch.randn(p.num_slots, 2, 16, 16, generator=gen, dtype=torch.float64)
    states, caches = {}, {}
    tokens = [random_token(p, gen, "cpu", torch.float64) for _ in range(3)]
    idx = torch.zeros(1, dtype=torch.int32)
    for fmt in ("raw", "predecayed"):
        cache = ReplaySSMCache.allocate(
            num_slots=p.num_slots, batch=1, num_q_heads=1, num_v_heads=2, key_dim=16, value_dim=16, cache_length=3,
            cache_dtype=torch.float64, ring_format=fmt,
        )  # fmt: skip
        S = S0.clone()
        for step, (mixed, a, b) in enumerate(tokens):
            out = torch.empty(1, 1, 2, 16, dtype=torch.float64)
            cache.write_pos.fill_(step)
            replayssm_decode_step(
                mixed, a, b, w.A_log, w.dt_bias, w.scale, S, cache.d_cache, cache.k_cache, cache.g_cache, out, idx,
                cache.write_pos, None, True, lb, ring_format=fmt,
            )  # fmt: skip
        states[fmt], caches[fmt] = S, cache
    toks = []
    for m, a, b in tokens[:2]:
        shapes = validate_decode_inputs(m, a, b, w.A_log, w.dt_bias, w.scale, S0, out, idx)
        toks.append(prepare_token(m, b, w.A_log, w.scale, shapes, torch.float64, True, lb))
    P0, P1 = toks[0].g[0], toks[0].g[0] + toks[1].g[0]
    pre = caches["predecayed"]
    torch.testing.assert_close(pre.g_cache[0, :, 0], P0, rtol=0, atol=1e-15)
    torch.testing.assert_close(pre.g_cache[0, :, 1], P1, rtol=0, atol=1e-15)
    torch.testing.assert_close(pre.k_cache[0, :, 1], toks[1].k[0] * torch.exp(-P1), rtol=1e-14, atol=0)
    assert pre.k_cache.shape[1] == 2 and caches["raw"].k_cache.shape[1] == 1  # per value head vs per q/k head
    torch.testing.assert_close(states["predecayed"], states["raw"], rtol=1e-13, atol=1e-13)  # the natural flush


def test_allocation_per_format():
    kw = dict(num_slots=5, batch=3, num_q_heads=2, num_v_heads=4, key_dim=16, value_dim=32, cache_length=6)
    raw, pre = (ReplaySSMCache.allocate(**kw, ring_format=f) for f in ("raw", "predecayed"))
    assert raw.k_cache.shape == (5, 2, 6, 16) and raw.g_cache.dtype is torch.float32
    assert pre.k_cache.shape == (5, 4, 6, 16) and pre.g_cache.dtype is torch.float32
    assert [c.ring_format for c in (raw, pre)] == ["raw", "predecayed"]
    with pytest.raises(ValueError, match=r"`ring_format` must be one of \['predecayed', 'raw'\]"):
        ReplaySSMCache.allocate(**kw, ring_format="fp8")


def _step_inputs(ring_format, *, alloc_format=None, H=2, HV=4, L=5):
    gen = torch.Generator().manual_seed(0)
    B, K, V, slots = 2, 16, 32, 3
    cache = ReplaySSMCache.allocate(
        num_slots=slots, batch=B, num_q_heads=H, num_v_heads=HV, key_dim=K, value_dim=V, cache_length=L,
        cache_dtype=torch.float32, ring_format=alloc_format or ring_format,
    )  # fmt: skip
    return (
        torch.randn(B, 2 * H * K + HV * V, generator=gen), torch.randn(B, HV * K, generator=gen),
        torch.randn(B, HV, generator=gen), torch.randn(HV, generator=gen), torch.randn(HV * K, generator=gen),
        K**-0.5, torch.randn(slots, HV, V, K, generator=gen), cache.d_cache, cache.k_cache, cache.g_cache,
        torch.empty(B, 1, HV, V), torch.tensor([0, 2], dtype=torch.int32), cache.write_pos,
    )  # fmt: skip


@pytest.mark.parametrize(
    "ring_format,alloc_format,lower_bound,pattern",
    [
        ("predecayed", "raw", -1.0, r"`k_cache` must have shape \[slots, HV, L, K\].*predecayed keys are per value"),
        ("raw", "predecayed", None, r"`k_cache` must have shape \[slots, H, L, K\].*keys per value head \(HV\)"),
        ("predecayed", None, None, r"ring_format='predecayed' needs the bounded gate.*pick_ring_format"),
        ("predecayed", None, 21.0, r"needs the bounded gate \(a finite lower_bound <= 0\)"),
        ("predecayed", None, -30.0, r"\(L - 1\) \* \|lower_bound\| <= 80 so that .*; got \(5 - 1\) \* 30 = 120"),
        ("fp8", "raw", None, r"`ring_format` must be one of"),
    ],
    ids=[
        "pre-shared-keys",
        "raw-per-head-keys",
        "pre-softplus",
        "pre-positive-bound",
        "pre-too-long",
        "unknown",
    ],  # fmt: skip
)
def test_format_errors_say_which_format_expected_what(ring_format, alloc_format, lower_bound, pattern):
    args = _step_inputs(ring_format if ring_format in RING_FORMATS else "raw", alloc_format=alloc_format)
    before = [t.clone() for t in args if isinstance(t, torch.Tensor)]
    with pytest.raises(ValueError, match=pattern):
        replayssm_decode_step(*args, None, True, lower_bound, ring_format=ring_format)
    after = [t for t in args if isinstance(t, torch.Tensor)]
    assert all(torch.equal(x.nan_to_num(7), y.nan_to_num(7)) for x, y in zip(before, after, strict=True))


def test_pick_ring_format_and_the_bytes_model():
    assert pick_ring_format(lower_bound=-5.0, cache_length=16) == "predecayed"
    assert pick_ring_format(lower_bound=None, cache_length=16) == "raw"
    assert pick_ring_format(lower_bound=-5.0, cache_length=2 + int(MAX_LOG_GROWTH / 5)) == "raw"
    # the model: leaner entries allow more; at L = 16 with fp32 state predecayed keys allow about 1.75x
    speed = {f: model_speedup(TrafficShape(32, 32, 128, 128, state_bytes=4, ring_format=f), 16) for f in RING_FORMATS}
    assert speed["raw"] < speed["predecayed"]
    assert round(speed["predecayed"], 2) == 1.75 and round(speed["raw"], 2) == 1.67
