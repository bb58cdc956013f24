"""KDA per-channel log decay ``g`` (``alpha = exp(g)``), softplus or bounded gate."""

from __future__ import annotations

import torch

SOFTPLUS_THRESHOLD = 20.0


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
    """
    cd = compute_dtype(a, dt_bias, A_log)
    num_v_heads = A_log.numel()
    x = a.to(cd).reshape(a.shape[0], num_v_heads, -1) + dt_bias.to(cd).reshape(num_v_heads, -1)
    A = torch.exp(A_log.to(cd)).reshape(num_v_heads, 1)
    if lower_bound is None:
        return -A * softplus(x)
    return float(lower_bound) * torch.sigmoid(A * x)
