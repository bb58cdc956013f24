"""The eager reference: ReplaySSM equals the standard recurrence, and every edge case of the contract."""

from __future__ import annotations

import pytest
import torch

from replayssm_ref import (
    ReplaySSMCache,
    advance_write_pos,
    kda_log_decay,
    materialize_state,
    recurrent_decode_step,
    replayssm_decode_step,
)
from replayssm_ref.harness import SENTINEL, Problem, random_token, random_weights, run_sequence, tolerance
from replayssm_ref.recurrence import prepare_token
from replayssm_ref.validation import validate_decode_inputs

F64 = torch.float64
GRID = [
    Problem(4, 1, 1, 16, 16, 1),
    Problem(4, 2, 4, 16, 32, 2),
    Problem(3, 1, 3, 32, 16, 3),
    Problem(5, 2, 2, 16, 64, 5),
    Problem(4, 2, 8, 16, 32, 8),
    Problem(2, 4, 8, 32, 32, 16),
    Problem(3, 1, 2, 16, 16, 32),
]


@pytest.mark.parametrize("p", GRID, ids=Problem.label)
@pytest.mark.parametrize("p_force", [0.0, 0.3], ids=["natural", "forced"])
def test_replay_equals_standard_recurrence_in_float64(p, p_force):
    r = run_sequence(p, steps=12, p_force=p_force, seed=p.cache_length, check_materialized=True, warm=True)
    assert r.max_rel <= 1e-12, (r.max_out_rel, r.max_state_rel)
    assert not r.nonfinite and r.untouched_ok, r.problems
    assert r.natural_flushes > 0 and (r.forced_flushes > 0) == (p_force > 0 and p.cache_length > 1)


@pytest.mark.parametrize("lower_bound", [None, -5.0, 0.0], ids=["softplus", "bounded-5", "bounded0"])
@pytest.mark.parametrize("l2norm", [True, False], ids=["l2norm", "raw-qk"])
def test_gates_and_normalisation_variants(lower_bound, l2norm):
    p = Problem(4, 2, 4, 16, 32, 4)
    r = run_sequence(
        p, steps=11, use_qk_l2norm=l2norm, lower_bound=lower_bound, seed=3, check_materialized=True, warm=True
    )
    assert r.max_rel <= 1e-12 and not r.nonfinite and r.untouched_ok and r.natural_flushes > 0


def _setup(p: Problem, seed=0, dtype=F64, cache_dtype=None):
    gen = torch.Generator().manual_seed(seed)
    w = random_weights(p, gen, "cpu", dtype)
    S = torch.randn(p.num_slots, p.num_v_heads, p.value_dim, p.key_dim, generator=gen, dtype=F64).to(dtype)
    cache = ReplaySSMCache.allocate(
        num_slots=p.num_slots,
        batch=p.batch,
        num_q_heads=p.num_q_heads,
        num_v_heads=p.num_v_heads,
        key_dim=p.key_dim,
        value_dim=p.value_dim,
        cache_length=p.cache_length,
        cache_dtype=cache_dtype or dtype,
    )
    out = torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, dtype=dtype)
    return gen, w, S, cache, out


def _fill_ring(cache, gen, upto):
    """Commit ``upto`` random entries (positions < upto) and leave NaN beyond."""
    for t in (cache.d_cache, cache.k_cache):
        t[:, :, :upto] = torch.randn(t[:, :, :upto].shape, generator=gen, dtype=F64).to(t.dtype) * 0.3
    cache.g_cache[:, :, :upto] = -torch.rand(cache.g_cache[:, :, :upto].shape, generator=gen, dtype=F64).to(
        cache.g_cache.dtype
    )


def test_empty_ring_rebuilds_the_checkpoint_exactly():
    p = Problem(3, 1, 2, 16, 16, 4)
    _, _, S, cache, _ = _setup(p)
    idx = torch.tensor([0, 2, 4], dtype=torch.int32)
    full = materialize_state(S, cache.d_cache, cache.k_cache, cache.g_cache, idx, cache.write_pos)
    assert torch.equal(full, S[idx.long()])  # write_pos = 0; the rings are all NaN


def test_natural_flush_writes_checkpoint_and_leaves_ring_untouched():
    p = Problem(2, 1, 2, 16, 16, 4)
    gen, w, S, cache, out = _setup(p)
    _fill_ring(cache, gen, p.cache_length - 1)
    cache.write_pos.fill_(p.cache_length - 1)
    idx = torch.tensor([1, 3], dtype=torch.int32)
    rings_before = [t.clone() for t in (cache.d_cache, cache.k_cache, cache.g_cache)]
    expected = _standard_after(p, w, S, cache, idx, gen_seed=5)
    mixed, a, b = random_token(p, torch.Generator().manual_seed(5), "cpu", F64)
    replayssm_decode_step(
        mixed, a, b, w.A_log, w.dt_bias, w.scale, S, *_rings(cache), out, idx, cache.write_pos, None, True
    )
    for before, after in zip(rings_before, _rings(cache), strict=True):
        assert torch.equal(before.nan_to_num(7.0), after.nan_to_num(7.0))  # slot L-1 never written
    torch.testing.assert_close(S[idx.long()], expected, rtol=1e-12, atol=1e-12)


def _rings(cache):
    return cache.d_cache, cache.k_cache, cache.g_cache


def _standard_after(p, w, S, cache, idx, gen_seed, force=None):
    """Post-token state from materialize + one standard step (on copies)."""
    full = materialize_state(S, *_rings(cache), idx, cache.write_pos)
    pool = full.clone()
    mixed, a, b = random_token(p, torch.Generator().manual_seed(gen_seed), "cpu", F64)
    o = torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, dtype=F64)
    rows = torch.arange(p.batch, dtype=torch.int32)
    recurrent_decode_step(mixed, a, b, w.A_log, w.dt_bias, w.scale, pool, o, rows, True)
    return pool


@pytest.mark.parametrize("cursor", [0, 2], ids=["c0", "mid-ring"])
@pytest.mark.parametrize("force_value", [1, 2, -1])
def test_forced_flush_folds_committed_entries_and_the_token(cursor, force_value):
    p = Problem(2, 2, 4, 16, 32, 5)
    gen, w, S, cache, out = _setup(p, seed=cursor)
    _fill_ring(cache, gen, cursor)
    cache.write_pos.fill_(cursor)
    idx = torch.tensor([3, 0], dtype=torch.int32)
    expected = _standard_after(p, w, S, cache, idx, gen_seed=9)
    mixed, a, b = random_token(p, torch.Generator().manual_seed(9), "cpu", F64)
    force = torch.full((p.batch,), force_value, dtype=torch.int32)
    rings_before = [t.clone() for t in _rings(cache)]
    replayssm_decode_step(
        mixed, a, b, w.A_log, w.dt_bias, w.scale, S, *_rings(cache), out, idx, cache.write_pos, force, True
    )
    torch.testing.assert_close(S[idx.long()], expected, rtol=1e-12, atol=1e-12)
    for before, after in zip(rings_before, _rings(cache), strict=True):
        assert torch.equal(before.nan_to_num(7.0), after.nan_to_num(7.0))  # nothing appended
    advance_write_pos(cache.write_pos, p.cache_length, force, idx)
    assert cache.write_pos.tolist() == [0, 0]


def test_forced_flush_at_cursor_zero_is_one_standard_step():
    p = Problem(3, 1, 2, 16, 16, 4)
    gen, w, S, cache, out = _setup(p)
    S_std = S.clone()
    idx = torch.tensor([0, 1, 2], dtype=torch.int32)
    mixed, a, b = random_token(p, gen, "cpu", F64)
    out_std = torch.empty_like(out)
    recurrent_decode_step(mixed, a, b, w.A_log, w.dt_bias, w.scale, S_std, out_std, idx, True)
    force = torch.ones(3, dtype=torch.int32)
    replayssm_decode_step(
        mixed, a, b, w.A_log, w.dt_bias, w.scale, S, *_rings(cache), out, idx, cache.write_pos, force, True
    )
    torch.testing.assert_close(out, out_std, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(S, S_std, rtol=1e-13, atol=1e-13)


def test_force_flush_none_equals_all_zeros():
    p = Problem(3, 2, 4, 16, 16, 3)
    results = []
    for force in (None, torch.zeros(3, dtype=torch.int32)):
        gen, w, S, cache, out = _setup(p, seed=1)
        _fill_ring(cache, gen, 2)
        cache.write_pos.copy_(torch.tensor([0, 1, 2], dtype=torch.int32))
        mixed, a, b = random_token(p, gen, "cpu", F64)
        idx = torch.tensor([0, 1, 2], dtype=torch.int32)
        replayssm_decode_step(
            mixed, a, b, w.A_log, w.dt_bias, w.scale, S, *_rings(cache), out, idx, cache.write_pos, force, True
        )
        results.append([out, S, *(t.nan_to_num(7.0) for t in _rings(cache))])
    for x, y in zip(*results, strict=True):
        assert torch.equal(x, y)


def test_append_writes_only_position_c_and_k_once_per_qk_head():
    p = Problem(2, 2, 6, 16, 32, 4)  # hpq = 3
    gen, w, S, cache, out = _setup(p)
    _fill_ring(cache, gen, 1)
    cache.write_pos.fill_(1)
    idx = torch.tensor([1, 3], dtype=torch.int32)
    before = [t.clone() for t in _rings(cache)]
    S_before = S.clone()
    mixed, a, b = random_token(p, gen, "cpu", F64)
    replayssm_decode_step(
        mixed, a, b, w.A_log, w.dt_bias, w.scale, S, *_rings(cache), out, idx, cache.write_pos, None, True
    )
    assert torch.equal(S, S_before)  # non-flush rows leave the checkpoint bitwise untouched
    for b_, a_ in zip(before, _rings(cache), strict=True):
        changed = (b_.nan_to_num(7.0) != a_.nan_to_num(7.0)).nonzero()
        assert set(changed[:, 0].tolist()) <= {1, 3} and set(changed[:, 2].tolist()) == {1}
    # the stored key is the token's normalised, unscaled key of each q/k head (the reference's own)
    shapes = validate_decode_inputs(mixed, a, b, w.A_log, w.dt_bias, w.scale, S, out, idx)
    tok = prepare_token(mixed, b, w.A_log, w.scale, shapes, F64, True, None)
    assert torch.equal(cache.k_cache[idx.long(), :, 1], tok.k_qk)
    g = kda_log_decay(a, w.dt_bias, w.A_log)
    torch.testing.assert_close(cache.g_cache[idx.long(), :, 1], g, rtol=0, atol=0)


@pytest.mark.parametrize("pad", [-1, -7])
def test_padding_rows_get_zero_output_and_touch_nothing(pad):
    p = Problem(3, 1, 2, 16, 16, 2)
    gen, w, S, cache, out = _setup(p)
    idx = torch.tensor([pad, 0, pad], dtype=torch.int32)  # slot 0 is a valid slot
    cache.write_pos.copy_(torch.tensor([1, 1, 0], dtype=torch.int32))
    _fill_ring(cache, gen, 1)
    S_before, rings_before = S.clone(), [t.clone() for t in _rings(cache)]
    out.fill_(float("nan"))
    mixed, a, b = random_token(p, gen, "cpu", F64)
    force = torch.tensor([1, 1, 1], dtype=torch.int32)
    replayssm_decode_step(
        mixed, a, b, w.A_log, w.dt_bias, w.scale, S, *_rings(cache), out, idx, cache.write_pos, force, True
    )
    assert (out[[0, 2]] == 0).all() and torch.isfinite(out[1]).all()
    assert torch.equal(S[1:], S_before[1:]) and not torch.equal(S[0], S_before[0])
    for bf, af in zip(rings_before, _rings(cache), strict=True):
        assert torch.equal(bf.nan_to_num(7.0), af.nan_to_num(7.0))
    wp = advance_write_pos(cache.write_pos, p.cache_length, force, idx)
    assert wp.tolist() == [1, 0, 0]


def test_advance_write_pos_contract():
    wp = torch.tensor([0, 1, 2, 3, 2, 1], dtype=torch.int32)
    force = torch.tensor([0, 0, 0, 0, 5, 0], dtype=torch.int32)
    idx = torch.tensor([0, 1, 2, 3, 4, -1], dtype=torch.int32)
    assert advance_write_pos(wp, 4, force, idx).tolist() == [1, 2, 3, 0, 0, 1]
    assert advance_write_pos(torch.zeros(3, dtype=torch.int32), 1).tolist() == [0, 0, 0]


def test_extreme_gates_stay_finite_and_exact():
    """Gate logits above the softplus threshold (linear branch) and decays that underflow e^Gamma."""
    p = Problem(2, 1, 2, 16, 16, 8)
    gen, w, S, cache, out = _setup(p)
    w.dt_bias.fill_(25.0)  # x > 20: softplus(x) = x; g ~ -A*25: e^Gamma underflows over the ring
    r_mixed = [random_token(p, gen, "cpu", F64) for _ in range(10)]
    S_std = S.clone()
    idx = torch.tensor([0, 2], dtype=torch.int32)
    for mixed, a, b in r_mixed:
        o_std = torch.empty_like(out)
        recurrent_decode_step(mixed, a, b, w.A_log, w.dt_bias, w.scale, S_std, o_std, idx, True)
        replayssm_decode_step(
            mixed, a, b, w.A_log, w.dt_bias, w.scale, S, *_rings(cache), out, idx, cache.write_pos, None, True
        )
        advance_write_pos(cache.write_pos, p.cache_length, None, idx)
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out, o_std, rtol=1e-12, atol=1e-12)
    x = torch.tensor([[30.0, -30.0]], dtype=F64)
    g = kda_log_decay(x, torch.zeros(2, dtype=F64), torch.zeros(1, dtype=F64))
    torch.testing.assert_close(
        g, torch.tensor([[[-30.0, -torch.log1p(torch.exp(torch.tensor(-30.0))).item()]]]).double()
    )


def test_layout_variants_give_identical_results():
    """a as [B,HV,K] or flat, dt_bias as [HV,K] or flat, strided mixed_qkv rows, strided state slots,
    cache views with offsets: all must give the same outputs and state as the plain layout."""
    p = Problem(3, 2, 4, 16, 32, 3)
    base = None
    for variant in ("plain", "shaped", "strided"):
        gen, w, S, cache, out = _setup(p, seed=4)
        _fill_ring(cache, gen, 2)
        cache.write_pos.copy_(torch.tensor([0, 1, 2], dtype=torch.int32))
        mixed, a, b = random_token(p, gen, "cpu", F64)
        idx = torch.tensor([2, 0, 4], dtype=torch.int32)
        rings = list(_rings(cache))
        dt = w.dt_bias
        state = S
        if variant == "shaped":
            a = a.view(p.batch, p.num_v_heads, p.key_dim)
            dt = dt.view(p.num_v_heads, p.key_dim)
        if variant == "strided":
            wide = torch.zeros(p.batch, p.qkv_width + 5, dtype=F64)
            wide[:, 3 : 3 + p.qkv_width] = mixed
            mixed = wide[:, 3 : 3 + p.qkv_width]
            big = torch.full((p.num_slots, p.num_v_heads + 2, p.value_dim, p.key_dim), SENTINEL, dtype=F64)
            big[:, 1:-1] = S
            state = big[:, 1:-1]
            offset = []
            for r in rings:
                host = torch.full((r.shape[0] + 1, *r.shape[1:]), 3.0, dtype=r.dtype)
                host[1:] = r
                offset.append(host[1:])
            rings = offset
        replayssm_decode_step(mixed, a, b, w.A_log, dt, w.scale, state, *rings, out, idx, cache.write_pos, None, True)
        got = [out.clone(), state.clone(), *(r.nan_to_num(7.0) for r in rings)]
        if variant == "strided":
            assert (big[:, 0] == SENTINEL).all() and (big[:, -1] == SENTINEL).all()
        if base is None:
            base = got
        else:
            for x, y in zip(base, got, strict=True):
                assert torch.equal(x, y), variant


def test_lower_precision_dtypes_track_float64():
    p = Problem(4, 2, 4, 16, 32, 4)
    r32 = run_sequence(p, steps=14, state_dtype=torch.float32, seed=2)
    r16 = run_sequence(p, steps=14, state_dtype=torch.bfloat16, cache_dtype=torch.bfloat16, seed=2)
    assert r32.max_rel <= tolerance(torch.float32, steps=14) and r32.untouched_ok
    assert r16.max_rel <= tolerance(torch.bfloat16, torch.float32, steps=14) and r16.untouched_ok


def test_cache_allocation_shapes_and_reset():
    c = ReplaySSMCache.allocate(
        num_slots=5, batch=3, num_q_heads=2, num_v_heads=4, key_dim=16, value_dim=32, cache_length=6
    )
    assert c.d_cache.shape == (5, 4, 6, 32) and c.k_cache.shape == (5, 2, 6, 16) and c.g_cache.shape == (5, 4, 6, 16)
    assert c.g_cache.dtype is torch.float32 and c.d_cache.dtype is torch.bfloat16 and c.cache_length == 6
    assert torch.isnan(c.d_cache.float()).all()
    c.write_pos.fill_(3)
    c.reset_rows([1])
    assert c.write_pos.tolist() == [3, 0, 3]
    c.reset_rows()
    assert c.write_pos.tolist() == [0, 0, 0]
    c.write_pos.fill_(2)
    c.reset_slots([4, 0], torch.tensor([4, -1, 1], dtype=torch.int32))  # row 1 is padding: untouched
    assert c.write_pos.tolist() == [0, 2, 2]
    assert c.nbytes_per_slot() == 4 * 6 * 32 * 2 + 2 * 6 * 16 * 2 + 4 * 6 * 16 * 4
    with pytest.raises(ValueError, match="multiple of num_q_heads"):
        ReplaySSMCache.allocate(
            num_slots=1, batch=1, num_q_heads=3, num_v_heads=4, key_dim=16, value_dim=16, cache_length=2
        )
