"""The log decay ``g`` of a token (``alpha = exp(g)``): KDA's per key channel, GDN's per value head.

Two gates share every other piece of the decode (the delta rule, the rings, the flush):

``kda`` (Kimi Delta Attention)
    ``a [B, HV*K]``, ``dt_bias [HV*K]``: one log decay per value head *and key channel*, softplus or
    bounded (``lower_bound``); ``g_cache [slots, HV, L, K]``.
``gdn`` (Gated DeltaNet)
    ``a [B, HV]``, ``dt_bias [HV]``: one log decay per value head, ``g = -exp(A_log) softplus(a +
    dt_bias)``; ``g_cache [slots, HV, L]``.

Internally a GDN gate is KDA's with one channel: ``g [B, HV, 1]`` broadcasts over K wherever KDA's
``[B, HV, K]`` is used, so the reference has one delta rule and one replay for both.
"""

from __future__ import annotations

import torch

SOFTPLUS_THRESHOLD = 20.0
GATES = ("kda", "gdn")


def check_gate_name(gate: str) -> None:
    if gate not in GATES:
        raise ValueError(f"`gate` must be one of {GATES} (KDA: per key channel; GDN: per value head); got {gate!r}")


def gate_channels(gate: str, key_dim: int) -> int:
    """Log decays per value head and token: K for KDA, 1 for GDN."""
    check_gate_name(gate)
    return key_dim if gate == "kda" else 1


def compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """float64 if any tensor is float64, else float32: the reference never computes in 16 bits."""
    return torch.float64 if any(t.dtype is torch.float64 for t in tensors) else torch.float32


def softplus(x: torch.Tensor) -> torch.Tensor:
    """log(1 + e^x), taken as x itself above the threshold (as the kernels do)."""
    return torch.where(x <= SOFTPLUS_THRESHOLD, torch.log1p(torch.exp(x.clamp(max=SOFTPLUS_THRESHOLD))), x)


def kda_log_decay(
    a: torch.Tensor,
    dt_bias: torch.Tensor,
    A_log: torch.Tensor,
    *,
    lower_bound: float | None = None,
) -> torch.Tensor:
    """Per-channel log decay ``g [B, HV, K]`` from raw gate logits.

    a        [B, HV*K] or [B, HV, K]   raw logits
    dt_bias  [HV*K] or [HV, K]
    A_log    [HV]

    With ``x = a + dt_bias`` and ``A = exp(A_log)`` per value head:
    softplus gate (``lower_bound is None``): ``g = -A * softplus(x)``;
    bounded gate (any float, 0.0 included):  ``g = lower_bound * sigmoid(A * x)``.
    (Given GDN's ``a [B, HV]`` and ``dt_bias [HV]`` it returns GDN's gate as ``[B, HV, 1]``.)
    """
    cd = compute_dtype(a, dt_bias, A_log)
    num_v_heads = A_log.numel()
    x = a.to(cd).reshape(a.shape[0], num_v_heads, -1) + dt_bias.to(cd).reshape(num_v_heads, -1)
    A = torch.exp(A_log.to(cd)).reshape(num_v_heads, 1)
    if lower_bound is None:
        return -A * softplus(x)
    return float(lower_bound) * torch.sigmoid(A * x)


def gdn_log_decay(a: torch.Tensor, dt_bias: torch.Tensor, A_log: torch.Tensor) -> torch.Tensor:
    """GDN's per-head log decay ``g [B, HV] = -exp(A_log) softplus(a + dt_bias)``; ``a [B, HV]``,
    ``dt_bias [HV]``, ``A_log [HV]``."""
    return kda_log_decay(a.reshape(a.shape[0], -1), dt_bias.reshape(-1), A_log)[..., 0]
