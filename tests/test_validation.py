"""Every validation error, one case each: the message names the tensor, the expectation and what it got.
Nothing is written to the caller's tensors before validation passes."""

from __future__ import annotations

import pytest
import torch

from replayssm_ref import ReplaySSMCache, recurrent_decode_step, replayssm_decode_step

B, H, HV, K, V, L, SLOTS = 3, 2, 4, 16, 32, 5, 6


def valid_inputs() -> dict:
    gen = torch.Generator().manual_seed(0)
    cache = ReplaySSMCache.allocate(
        num_slots=SLOTS, batch=B, num_q_heads=H, num_v_heads=HV, key_dim=K, value_dim=V, cache_length=L,
        cache_dtype=torch.float32,
    )  # fmt: skip
    return {
        "mixed_qkv": torch.randn(B, 2 * H * K + HV * V, generator=gen),
        "a": torch.randn(B, HV * K, generator=gen),
        "b": torch.randn(B, HV, generator=gen),
        "A_log": torch.randn(HV, generator=gen),
        "dt_bias": torch.randn(HV * K, generator=gen),
        "scale": K**-0.5,
        "initial_state": torch.randn(SLOTS, HV, V, K, generator=gen),
        "d_cache": cache.d_cache,
        "k_cache": cache.k_cache,
        "g_cache": cache.g_cache,
        "out": torch.full((B, 1, HV, V), 7.0),
        "ssm_state_indices": torch.tensor([0, 2, -1], dtype=torch.int32),
        "write_pos": torch.tensor([0, 1, 4], dtype=torch.int32),
        "force_flush": None,
    }


def t(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)


CASES = [
    ("a-ndim", {"a": t(B)}, r"`a` must be a contiguous \[B, HV\*K\] or \[B, HV, K\] tensor; got shape \[3\]"),
    ("a-noncontig", {"a": t(HV * K, B).T}, r"`a` must be a contiguous .*strides"),
    ("dt_bias-ndim", {"dt_bias": t(1, HV, K)}, r"`dt_bias` must be a contiguous \[HV\*K\] or \[HV, K\]"),
    ("mixed-ndim", {"mixed_qkv": t(B, 1, 192)}, r"`mixed_qkv` must have shape \[B, 2\*H\*K \+ HV\*V\]; got 3-D"),
    ("mixed-stride", {"mixed_qkv": t(192, B).T}, r"`mixed_qkv` must have last-dim stride 1"),
    ("b-ndim", {"b": t(B * HV)}, r"`b` must have shape \[B, HV\]; got 1-D"),
    ("b-stride", {"b": t(HV, B).T}, r"`b` must have last-dim stride 1"),
    ("A_log-shape", {"A_log": t(HV, 1)}, r"`A_log` must be a 1-D \[HV\] tensor"),
    ("indices-ndim", {"ssm_state_indices": t(B, 1, dtype=torch.int32)}, r"`ssm_state_indices` must have shape \[B\]"),
    ("indices-dtype", {"ssm_state_indices": t(B)}, r"`ssm_state_indices` must have dtype torch.int32 or torch.int64"),
    ("out-noncontig", {"out": t(V, HV, 1, B).permute(3, 2, 1, 0)}, r"`out` must be contiguous"),
    ("scale-type", {"scale": torch.tensor(0.25)}, r"`scale` must be a Python float; got Tensor"),
    ("a-batch", {"a": t(B + 1, HV * K)}, r"`a` must have batch size B = 3 \(from mixed_qkv\)"),
    ("b-batch", {"b": t(B + 1, HV)}, r"`b` must have batch size B = 3"),
    ("indices-batch", {"ssm_state_indices": t(B + 1, dtype=torch.int32)}, r"`ssm_state_indices` must have batch size"),
    ("state-ndim", {"initial_state": t(SLOTS, HV, V * K)}, r"`initial_state` must have shape \[slots, HV, V, K\]"),
    (
        "state-stride",
        {"initial_state": t(SLOTS, HV, K, V).transpose(2, 3)},
        r"`initial_state` must have last-dim stride",
    ),
    ("state-pow2", {"initial_state": t(SLOTS, HV, V, 24)}, r"power-of-two V and K .* \(V=32, K=24\)"),
    ("state-int", {"initial_state": t(SLOTS, HV, V, K, dtype=torch.int32)}, r"`initial_state` must have a floating"),
    ("state-k-first", {"initial_state": t(SLOTS, HV, K, V)}, r"`initial_state` must be V-major .*K-first.*FLA"),
    ("a-value-dim", {"a": t(B, HV * V)}, r"`a` must have HV\*K = 4\*16 = 64 .*sized with value_dim"),
    ("b-heads", {"b": t(B, HV + 1)}, r"`b` must have shape \[B, HV\] = \[3, 4\]; got shape \[3, 5\]"),
    ("A_log-numel", {"A_log": t(HV + 1)}, r"`A_log` must have HV = 4 elements; got shape \[5\]"),
    ("dt_bias-numel", {"dt_bias": t(HV * V)}, r"`dt_bias` must have HV\*K = 64 elements.*value_dim"),
    ("out-shape", {"out": t(B, HV, V)}, r"`out` must have shape \[B, 1, HV, V\] = \[3, 1, 4, 32\]; got \[3, 4, 32\]"),
    ("qk-width-odd", {"mixed_qkv": t(B, HV * V + 17)}, r"`mixed_qkv` must have width 2\*H\*K \+ HV\*V"),
    ("qk-width-not-k", {"mixed_qkv": t(B, HV * V + 2 * 8)}, r"multiple of K"),
    ("gqa-ratio", {"mixed_qkv": t(B, HV * V + 2 * 3 * K)}, r"HV = 4 a multiple of H; got H = 3"),
    ("write_pos-dtype", {"write_pos": t(B, dtype=torch.int64)}, r"`write_pos` must be a 1-D int32 tensor.*int64"),
    ("write_pos-shape", {"write_pos": t(B + 1, dtype=torch.int32)}, r"`write_pos` must have shape \[B\] = \[3\]"),
    ("force-dtype", {"force_flush": t(B)}, r"`force_flush` must be a 1-D int32 tensor"),
    ("force-shape", {"force_flush": t(B - 1, dtype=torch.int32)}, r"`force_flush` must have shape \[B\] = \[3\]"),
    ("d-ndim", {"d_cache": t(SLOTS, HV, L * V)}, r"`d_cache` must be a 4-D ring"),
    ("k-dtype", {"k_cache": t(SLOTS, H, L, K, dtype=torch.int32)}, r"`k_cache` must have a floating dtype"),
    ("d-length0", {"d_cache": t(SLOTS, HV, 0, V)}, r"ring length L = d_cache.shape\[2\] of at least 1"),
    (
        "d-key-dim",
        {"d_cache": t(SLOTS, HV, L, K)},
        r"`d_cache` must have shape \[slots, HV, L, V\] = \[\*, 4, 5, 32\].*key_dim",
    ),
    ("k-heads", {"k_cache": t(SLOTS, H + 1, L, K)}, r"`k_cache` must have shape \[slots, H, L, K\].*count H"),
    ("k-length", {"k_cache": t(SLOTS, H, L + 1, K)}, r"`k_cache` .*every ring must have d_cache's length L"),
    (
        "g-value-dim",
        {"g_cache": t(SLOTS, HV, L, V)},
        r"`g_cache` must have shape \[slots, HV, L, K\] = \[\*, 4, 5, 16\]; got \[6, 4, 5, 32\]: last dim equals "
        r"value_dim, but the gate shares key_dim",
    ),
    (
        "g-qk-heads",
        {"g_cache": t(SLOTS, H, L, K)},
        r"`g_cache` .*grouped by q/k heads \(H\), but the gate is per value",
    ),
    ("g-length", {"g_cache": t(SLOTS, HV, L - 1, K)}, r"`g_cache` .*every ring must have d_cache's length L"),
    ("g-dtype", {"g_cache": t(SLOTS, HV, L, K, dtype=torch.bfloat16)}, r"`g_cache` must have dtype torch.float32"),
    ("cursor-range", {"write_pos": torch.tensor([0, 5, 0], dtype=torch.int32)}, r"`write_pos` must lie in \[0, L-1\]"),
    ("cursor-negative", {"write_pos": torch.tensor([-1, 0, 0], dtype=torch.int32)}, r"got \[-1\] on rows \[0\]"),
    ("slot-range", {"ssm_state_indices": torch.tensor([0, 6, -1], dtype=torch.int32)}, r"0 <= index < 6"),
    ("slot-duplicate", {"ssm_state_indices": torch.tensor([2, 2, -1], dtype=torch.int32)}, r"slot\(s\) \[2\] used by"),
]


@pytest.mark.parametrize("change,pattern", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_replayssm_step_rejects(change, pattern):
    kw = valid_inputs() | change
    before = {k: v.clone() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    with pytest.raises(ValueError, match=pattern):
        replayssm_decode_step(**kw)
    for name, value in before.items():  # nothing written before validation passes
        assert torch.equal(kw[name].nan_to_num(3.0), value.nan_to_num(3.0)), name


def test_device_mismatch_is_named():
    kw = valid_inputs()
    kw["b"] = kw["b"].to("meta")
    with pytest.raises(ValueError, match=r"`b` must be on mixed_qkv's device cpu; got meta"):
        replayssm_decode_step(**kw)


def test_value_checks_can_be_turned_off_and_standard_step_shares_validation():
    kw = valid_inputs() | {"ssm_state_indices": torch.tensor([2, 2, -1], dtype=torch.int32)}
    replayssm_decode_step(**kw, check_values=False)  # opt-out: the caller vouches for the indices
    std = {k: kw[k] for k in ("mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out")}
    with pytest.raises(ValueError, match="used by several rows"):
        recurrent_decode_step(**std, ssm_state_indices=kw["ssm_state_indices"])
    with pytest.raises(ValueError, match=r"`out` must have shape"):
        recurrent_decode_step(**(std | {"out": t(B, HV, V)}), ssm_state_indices=torch.zeros(B, dtype=torch.int32))
