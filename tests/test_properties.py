"""Property tests: for random shapes, cursors and flush masks, one ReplaySSM step from any consistent
(checkpoint, ring) equals one standard step on the materialised state, and the ring invariant holds."""

from __future__ import annotations

import torch
from hypothesis import given, settings
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
    L = draw(st.integers(1, 9))
    B = draw(st.integers(1, 4))
    p = Problem(B, h, hv, k, v, L)
    cursors = draw(st.lists(st.integers(0, L - 1), min_size=B, max_size=B))
    force = draw(st.lists(st.sampled_from([0, 0, 1, -3]), min_size=B, max_size=B))
    pad = draw(st.lists(st.booleans(), min_size=B, max_size=B))
    return p, cursors, force, pad, draw(st.integers(0, 2**16)), draw(st.sampled_from([None, -2.0]))


@settings(max_examples=60, deadline=None)
@given(cases())
def test_one_step_equals_standard_step_on_materialised_state(case):
    p, cursors, force, pad, seed, lower_bound = case
    gen = torch.Generator().manual_seed(seed)
    w = random_weights(p, gen, "cpu", F64)
    S = torch.randn(p.num_slots, p.num_v_heads, p.value_dim, p.key_dim, generator=gen, dtype=F64)
    cache = ReplaySSMCache.allocate(
        num_slots=p.num_slots, batch=p.batch, num_q_heads=p.num_q_heads, num_v_heads=p.num_v_heads,
        key_dim=p.key_dim, value_dim=p.value_dim, cache_length=p.cache_length, cache_dtype=F64,
    )  # fmt: skip
    for t in (cache.d_cache, cache.k_cache):  # committed entries random, the rest stays NaN (stale)
        t.copy_(
            torch.where(
                torch.arange(p.cache_length)[None, None, :, None] < max(cursors),
                torch.randn(t.shape, generator=gen, dtype=F64) * 0.3,
                t,
            )
        )
    cache.g_cache.copy_(
        torch.where(
            torch.arange(p.cache_length)[None, None, :, None] < max(cursors),
            -torch.rand(cache.g_cache.shape, generator=gen, dtype=F64),
            cache.g_cache,
        )
    )
    slots = torch.randperm(p.num_slots, generator=gen)[: p.batch].to(torch.int32)
    idx = torch.where(torch.tensor(pad), torch.full_like(slots, -1), slots)
    cache.write_pos.copy_(torch.tensor(cursors, dtype=torch.int32))
    ff = torch.tensor(force, dtype=torch.int32)
    mixed, a, b = random_token(p, gen, "cpu", F64)

    # Standard step on the materialised pre-token state, in a scratch pool indexed by row.
    pre = materialize_state(S, cache.d_cache, cache.k_cache, cache.g_cache, idx, cache.write_pos)
    out_std = torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, dtype=F64)
    rows = torch.where(idx >= 0, torch.arange(p.batch, dtype=torch.int32), idx)
    recurrent_decode_step(mixed, a, b, w.A_log, w.dt_bias, w.scale, pre, out_std, rows, True, lower_bound)

    out = torch.full_like(out_std, float("nan"))
    replayssm_decode_step(
        mixed, a, b, w.A_log, w.dt_bias, w.scale, S, cache.d_cache, cache.k_cache, cache.g_cache, out, idx,
        cache.write_pos, ff, True, lower_bound,
    )  # fmt: skip
    torch.testing.assert_close(out, out_std, rtol=1e-11, atol=1e-11)
    advance_write_pos(cache.write_pos, p.cache_length, ff, idx)
    post = materialize_state(S, cache.d_cache, cache.k_cache, cache.g_cache, idx, cache.write_pos)
    valid = idx >= 0
    torch.testing.assert_close(post[valid], pre[valid], rtol=1e-11, atol=1e-11)
    assert ((cache.write_pos >= 0) & (cache.write_pos < p.cache_length)).all()
