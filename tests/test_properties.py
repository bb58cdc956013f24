"""Property test: for random shapes, per-row cursors, flush flags and padding, a ReplaySSM step on a
ring built by ReplaySSM itself gives the output and post-token state of the independent standard
recurrence run over the same tokens. Every example has a live ring (L >= 2, a valid row with c > 0)."""

from __future__ import annotations

import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from replayssm_ref import (
    ReplaySSMCache,
    advance_write_pos,
    materialize_state,
    recurrent_decode_step,
    replayssm_decode_step,
)
from replayssm_ref.harness import Problem, random_token, random_weights

F64 = torch.float64


@st.composite
def cases(draw):
    h = draw(st.sampled_from([1, 2]))
    hv = h * draw(st.sampled_from([1, 2, 3]))
    k, v = draw(st.sampled_from([4, 8, 16])), draw(st.sampled_from([4, 8, 16]))
    L = draw(st.integers(2, 9))
    B = draw(st.integers(1, 4))
    cursors = draw(st.lists(st.integers(0, L - 1), min_size=B, max_size=B))
    force = draw(st.lists(st.sampled_from([0, 0, 1, -3]), min_size=B, max_size=B))
    pad = draw(st.lists(st.booleans(), min_size=B, max_size=B))
    assume(any(c > 0 and not p for c, p in zip(cursors, pad, strict=True)))
    extra = dict(seed=draw(st.integers(0, 2**16)), lower_bound=draw(st.sampled_from([None, -2.0])),
                 l2norm=draw(st.booleans()))  # fmt: skip
    return Problem(B, h, hv, k, v, L), cursors, force, pad, extra


@settings(max_examples=60, deadline=None)
@given(cases())
def test_replay_step_equals_standard_recurrence(case):
    p, cursors, force, pad, extra = case
    gen = torch.Generator().manual_seed(extra["seed"])
    l2, lb = extra["l2norm"], extra["lower_bound"]
    qk_scale = 1.0 if l2 else p.key_dim**-0.5
    w = random_weights(p, gen, "cpu", F64)
    S = torch.randn(p.num_slots, p.num_v_heads, p.value_dim, p.key_dim, generator=gen, dtype=F64)
    S_std = S.clone()
    cache = ReplaySSMCache.allocate(
        num_slots=p.num_slots, batch=p.batch, num_q_heads=p.num_q_heads, num_v_heads=p.num_v_heads,
        key_dim=p.key_dim, value_dim=p.value_dim, cache_length=p.cache_length, cache_dtype=F64,
    )  # fmt: skip
    slots = torch.randperm(p.num_slots, generator=gen)[: p.batch].to(torch.int32)
    target = torch.tensor(cursors, dtype=torch.int32)
    out = torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, dtype=F64)
    for t in range(max(cursors)):  # history: row r takes cursors[r] tokens, appended (c < L - 1: no flush)
        idx = torch.where(target > t, slots, torch.full_like(slots, -1))
        mixed, a, b = random_token(p, gen, "cpu", F64, qk_scale=qk_scale)
        replayssm_decode_step(
            mixed, a, b, w.A_log, w.dt_bias, w.scale, S, cache.d_cache, cache.k_cache, cache.g_cache, out, idx,
            cache.write_pos, None, l2, lb,
        )  # fmt: skip
        recurrent_decode_step(mixed, a, b, w.A_log, w.dt_bias, w.scale, S_std, out.clone(), idx, l2, lb)
        advance_write_pos(cache.write_pos, p.cache_length, None, idx)
    assert cache.write_pos.tolist() == cursors

    idx = torch.where(torch.tensor(pad), torch.full_like(slots, -1), slots)
    ff = torch.tensor(force, dtype=torch.int32)
    mixed, a, b = random_token(p, gen, "cpu", F64, qk_scale=qk_scale)
    out_std = torch.empty_like(out)
    recurrent_decode_step(mixed, a, b, w.A_log, w.dt_bias, w.scale, S_std, out_std, idx, l2, lb)
    out.fill_(float("nan"))
    replayssm_decode_step(
        mixed, a, b, w.A_log, w.dt_bias, w.scale, S, cache.d_cache, cache.k_cache, cache.g_cache, out, idx,
        cache.write_pos, ff, l2, lb,
    )  # fmt: skip
    torch.testing.assert_close(out, out_std, rtol=1e-10, atol=1e-10)
    advance_write_pos(cache.write_pos, p.cache_length, ff, idx)
    post = materialize_state(S, cache.d_cache, cache.k_cache, cache.g_cache, slots, cache.write_pos)
    torch.testing.assert_close(post, S_std[slots.long()], rtol=1e-10, atol=1e-10)
    assert ((cache.write_pos >= 0) & (cache.write_pos < p.cache_length)).all()
