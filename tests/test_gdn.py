"""Gated DeltaNet in the reference: one log decay per value head, the rest of ReplaySSM shared with KDA.
Float64 replay equals the GDN recurrence, a GDN step equals the KDA step whose gate is the same on
every key channel, and mis-shaped GDN inputs say which gate they look like."""

from __future__ import annotations

import pytest
import torch
from test_reference import GRID
from test_validation import HV, SLOTS, B, H, K, L, V, t

from replayssm_ref import (
    ReplaySSMCache,
    gdn_log_decay,
    gdn_recurrent_decode_step,
    gdn_replayssm_decode_step,
    materialize_state,
    replayssm_decode_step,
)
from replayssm_ref.gates import softplus
from replayssm_ref.harness import Problem, random_token, random_weights, run_sequence, same_bits, tolerance

F64 = torch.float64


@pytest.mark.parametrize("p", GRID, ids=Problem.label)
@pytest.mark.parametrize("p_force", [0.0, 0.3], ids=["natural", "forced"])
def test_gdn_replay_equals_gdn_recurrence_in_float64(p, p_force):
    r = run_sequence(
        p, steps=12, p_force=p_force, seed=p.cache_length, check_materialized=True, warm=True, gate="gdn"
    )  # fmt: skip
    assert r.max_rel <= 1e-12, (r.max_out_rel, r.max_state_rel)
    assert not r.nonfinite and r.untouched_ok, r.problems
    assert r.natural_flushes > 0 and (r.forced_flushes > 0) == (p_force > 0 and p.cache_length > 1)


@pytest.mark.parametrize("l2norm", [True, False], ids=["l2norm", "raw-qk"])
def test_gdn_normalisation_and_lower_precision(l2norm):
    p = Problem(4, 2, 4, 16, 32, 8)
    r = run_sequence(p, steps=11, use_qk_l2norm=l2norm, seed=3, check_materialized=True, warm=True, gate="gdn")
    assert r.max_rel <= 1e-12 and not r.nonfinite and r.untouched_ok and r.natural_flushes > 0
    r = run_sequence(p, steps=11, use_qk_l2norm=l2norm, seed=3, state_dtype=torch.float32, gate="gdn")
    assert r.max_rel <= tolerance(torch.float32, steps=11) and r.untouched_ok


def test_gdn_log_decay_is_minus_A_softplus():
    a, dt, A_log = torch.randn(3, 4, dtype=F64) * 10, torch.randn(4, dtype=F64), torch.randn(4, dtype=F64)
    want = -torch.exp(A_log) * torch.nn.functional.softplus(a + dt, threshold=20.0)
    assert gdn_log_decay(a, dt, A_log).shape == (3, 4)
    torch.testing.assert_close(gdn_log_decay(a, dt, A_log), want, rtol=1e-14, atol=1e-14)
    assert softplus(torch.tensor([30.0], dtype=F64)).item() == 30.0


@pytest.mark.parametrize("cursor", [0, 3, L - 1], ids=["empty", "mid-ring", "natural-flush"])
def test_gdn_step_equals_kda_step_with_the_gate_repeated_over_k(cursor):
    """Everything but the gate is shared: a KDA step whose gate logits and bias repeat GDN's over the
    K channels, with the gate ring repeated likewise, writes the same output, rings and checkpoint."""
    p = Problem(3, 2, 4, 16, 32, L)
    gen = torch.Generator().manual_seed(cursor)
    w = random_weights(p, gen, "cpu", F64, gate="gdn")
    mixed, a, b = random_token(p, gen, "cpu", F64, gate="gdn")
    S = torch.randn(p.num_slots, HV, 32, 16, generator=gen, dtype=F64)
    kw = {"num_slots": p.num_slots, "batch": 3, "num_q_heads": 2, "num_v_heads": 4, "key_dim": 16, "value_dim": 32,
          "cache_length": L, "cache_dtype": F64}  # fmt: skip
    gdn, kda = ReplaySSMCache.allocate(**kw, gate="gdn"), ReplaySSMCache.allocate(**kw)
    for c in (gdn, kda):
        c.write_pos.fill_(cursor)
    gdn.d_cache[:, :, :cursor] = kda.d_cache[:, :, :cursor] = torch.randn(p.num_slots, HV, cursor, 32, dtype=F64)
    gdn.k_cache[:, :, :cursor] = kda.k_cache[:, :, :cursor] = torch.randn(p.num_slots, 2, cursor, 16, dtype=F64)
    gdn.g_cache[:, :, :cursor] = -torch.rand(p.num_slots, HV, cursor, dtype=F64)
    kda.g_cache[:, :, :cursor] = gdn.g_cache[:, :, :cursor, None].expand(-1, -1, -1, 16)
    idx = torch.tensor([1, -1, 3], dtype=torch.int32)
    outs = [torch.empty(3, 1, HV, 32, dtype=F64) for _ in range(2)]
    S_gdn, S_kda = S.clone(), S.clone()
    gdn_replayssm_decode_step(mixed, a, b, w.A_log, w.dt_bias, w.scale, S_gdn, gdn.d_cache, gdn.k_cache,
                              gdn.g_cache, outs[0], idx, gdn.write_pos, None, True)  # fmt: skip
    a_k, dt_k = a.repeat_interleave(16, dim=1), w.dt_bias.repeat_interleave(16)
    replayssm_decode_step(mixed, a_k, b, w.A_log, dt_k, w.scale, S_kda, kda.d_cache, kda.k_cache, kda.g_cache,
                          outs[1], idx, kda.write_pos, None, True)  # fmt: skip
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(S_gdn, S_kda, rtol=1e-13, atol=1e-13, equal_nan=True)
    pairs = ((gdn.d_cache, kda.d_cache), (gdn.k_cache, kda.k_cache), (gdn.g_cache[..., None], kda.g_cache[..., :1]))
    for x, y in pairs:
        torch.testing.assert_close(x, y, rtol=1e-13, atol=1e-13, equal_nan=True)
    # and the standard GDN step from the materialised pre-token state (write_pos is not advanced yet)
    S_std, out_std = S.clone(), torch.empty(3, 1, HV, 32, dtype=F64)
    pre = materialize_state(S, gdn.d_cache, gdn.k_cache, gdn.g_cache, idx, gdn.write_pos)
    S_std[idx[idx >= 0].long()] = pre[idx >= 0]
    gdn_recurrent_decode_step(mixed, a, b, w.A_log, w.dt_bias, w.scale, S_std, out_std, idx, True)
    torch.testing.assert_close(out_std, outs[0], rtol=1e-12, atol=1e-12)


def test_gdn_cache_allocation():
    c = ReplaySSMCache.allocate(num_slots=5, batch=2, num_q_heads=2, num_v_heads=4, key_dim=16, value_dim=32,
                                cache_length=6, gate="gdn")  # fmt: skip
    assert c.g_cache.shape == (5, 4, 6) and c.g_cache.dtype is torch.float32 and c.gate == "gdn"
    assert c.k_cache.shape == (5, 2, 6, 16) and c.d_cache.shape == (5, 4, 6, 32)
    assert c.nbytes_per_slot() == 4 * 6 * 32 * 2 + 2 * 6 * 16 * 2 + 4 * 6 * 4
    with pytest.raises(ValueError, match=r"`ring_format` must be 'raw' for Gated DeltaNet"):
        ReplaySSMCache.allocate(num_slots=5, batch=2, num_q_heads=2, num_v_heads=4, key_dim=16, value_dim=32,
                                cache_length=6, gate="gdn", ring_format="predecayed")  # fmt: skip
    with pytest.raises(ValueError, match=r"`gate` must be one of \('kda', 'gdn'\)"):
        ReplaySSMCache.allocate(num_slots=5, batch=2, num_q_heads=2, num_v_heads=4, key_dim=16, value_dim=32,
                                cache_length=6, gate="mamba")  # fmt: skip


def gdn_inputs() -> dict:
    gen = torch.Generator().manual_seed(0)
    cache = ReplaySSMCache.allocate(num_slots=SLOTS, batch=B, num_q_heads=H, num_v_heads=HV, key_dim=K, value_dim=V,
                                    cache_length=L, cache_dtype=torch.float32, gate="gdn")  # fmt: skip
    return {
        "mixed_qkv": torch.randn(B, 2 * H * K + HV * V, generator=gen), "a": torch.randn(B, HV, generator=gen),
        "b": torch.randn(B, HV, generator=gen), "A_log": torch.randn(HV, generator=gen),
        "dt_bias": torch.randn(HV, generator=gen), "scale": K**-0.5,
        "initial_state": torch.randn(SLOTS, HV, V, K, generator=gen), "d_cache": cache.d_cache,
        "k_cache": cache.k_cache, "g_cache": cache.g_cache, "out": torch.full((B, 1, HV, V), 7.0),
        "ssm_state_indices": torch.tensor([0, 2, -1], dtype=torch.int32),
        "write_pos": torch.tensor([0, 1, 4], dtype=torch.int32), "force_flush": None,
    }  # fmt: skip


GDN_CASES = [
    ("g-kda-layout", {"g_cache": t(SLOTS, HV, L, K)},
     r"`g_cache` must have shape \[slots, HV, L\] = \[\*, 4, 5\] \(GDN: one log decay per value head and entry\); "
     r"got \[6, 4, 5, 16\]: \[slots, HV, L, K\] is Kimi Delta Attention's per-channel gate ring"),
    ("g-length", {"g_cache": t(SLOTS, HV, L + 1)}, r"`g_cache` .*every ring must have d_cache's length L"),
    ("g-dtype", {"g_cache": t(SLOTS, HV, L, dtype=torch.bfloat16)}, r"`g_cache` must have dtype torch.float32"),
    ("a-per-channel", {"a": t(B, HV * K)},
     r"`a` must have shape \[B, HV\] = \[3, 4\] \(GDN: one logit per value head\); got shape \[3, 64\]: per key "
     r"channel \(HV\*K\) is Kimi Delta Attention's gate"),
    ("a-3d", {"a": t(B, HV, K)}, r"`a` must have shape \[B, HV\] .*Kimi Delta Attention's gate"),
    ("dt-per-channel", {"dt_bias": t(HV * K)}, r"`dt_bias` must have shape \[HV\] = \[4\] .*Kimi Delta Attention"),
    ("a-heads", {"a": t(B, HV + 1)}, r"`a` must have shape \[B, HV\] = \[3, 4\] .*got shape \[3, 5\]$"),
]  # fmt: skip


@pytest.mark.parametrize("change,pattern", [c[1:] for c in GDN_CASES], ids=[c[0] for c in GDN_CASES])
def test_gdn_step_rejects(change, pattern):
    kw = gdn_inputs() | change
    before = {k: v.clone() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    with pytest.raises(ValueError, match=pattern):
        gdn_replayssm_decode_step(**kw)
    for name, value in before.items():  # nothing written before validation passes
        assert same_bits(kw[name], value), name


def test_kda_given_gdn_inputs_points_to_gdn():
    from test_validation import valid_inputs

    gdn = gdn_inputs()
    with pytest.raises(ValueError, match=r"`g_cache` must be a 4-D ring .*\[slots, HV, L\] is Gated DeltaNet's"):
        replayssm_decode_step(**(valid_inputs() | {"g_cache": gdn["g_cache"]}))
    with pytest.raises(ValueError, match=r"`a` must have HV\*K .*one logit per value head is Gated DeltaNet's"):
        replayssm_decode_step(**(valid_inputs() | {"a": gdn["a"]}))
    with pytest.raises(ValueError, match=r"`dt_bias` must have HV\*K .*one bias per value head is Gated DeltaNet's"):
        replayssm_decode_step(**(valid_inputs() | {"dt_bias": gdn["dt_bias"]}))
