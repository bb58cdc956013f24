"""The public decode calls: same signatures and semantics as the reference (``replayssm_ref``) and, for
KDA, as sglang's Helion kernels of the same names; Gated DeltaNet's take KDA's arguments with its gate
(``a [B, HV]``, ``dt_bias [HV]``, ``g_cache [slots, HV, L]``) and no ``lower_bound``.

Both validate every input first (``replayssm_ref.validation``: nothing is written before that
passes), then run the launches ``replayssm_kernels.plan`` builds. Nothing branches on the host
afterwards: cursors, flushes and padding are device values, so a step can be captured in a CUDA graph
and replayed with new cursors.
"""

from __future__ import annotations

import os

import helion
import torch

from .plan import plan_replayssm, plan_standard, run_launches


def _check_device(t: torch.Tensor) -> None:
    """A one-line error for a CPU tensor without an interpreter (Helion would end in a long traceback)."""
    if (
        t.device.type != "cuda"
        and os.environ.get("HELION_INTERPRET") != "1"
        and os.environ.get("TRITON_INTERPRET") != "1"
    ):
        raise RuntimeError(
            f"the Helion kernels run on a CUDA device; mixed_qkv is on {t.device}. On a CPU, run them as eager "
            "PyTorch with HELION_INTERPRET=1 (or as Triton code with TRITON_INTERPRET=1), or use replayssm_ref."
        )
    if os.environ.get("TRITON_INTERPRET") == "1":
        from ._triton_interpret import patch_libdevice

        patch_libdevice()


def helion_fused_recurrent_kda_replayssm_decode(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    d_cache: torch.Tensor,
    k_cache: torch.Tensor,
    g_cache: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    write_pos: torch.Tensor,
    force_flush: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    ring_format: str = "raw",
    launches: int | None = None,
    config: helion.Config | dict | None = None,
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One ReplaySSM decode step, in place: writes ``out``, appends to the rings or (flush rows)
    rewrites ``initial_state``; returns ``(out, initial_state)``. Same semantics as
    ``replayssm_ref.replayssm_decode_step``; the caller advances ``write_pos``
    (``replayssm_ref.advance_write_pos``).

    Shapes: ``mixed_qkv [B, 2HK + HV V]``, ``a [B, HV K]`` or ``[B, HV, K]``, ``b [B, HV]``, ``A_log [HV]``,
    ``dt_bias [HV K]`` or ``[HV, K]``, ``initial_state [slots, HV, V, K]``, ``d_cache [slots, HV, L, V]``,
    ``k_cache [slots, H, L, K]``, ``g_cache [slots, HV, L, K]`` (fp32), ``out [B, 1, HV, V]``,
    ``ssm_state_indices``, ``write_pos`` and ``force_flush`` ``[B]`` int32. ``ring_format`` names what
    the rings hold (``replayssm_ref.formats``: ``raw``, the seed's and the default;
    ``predecayed``, whose ``k_cache`` is ``[slots, HV, L, K]``); allocate them with ``ReplaySSMCache``.

    A row whose slot is negative (padding) or outside the pools, or whose cursor is outside
    ``[0, L)``, gets zero output and touches nothing (``check_values=True`` raises for the last two).

    ``launches``: ``None`` (the device's default design), ``2``, ``3``, or ``0`` (the standard kernel,
    L = 1 only); ``config``: a table-style dict or ``helion.Config`` in place of the tuned table's.
    """
    _check_device(mixed_qkv)
    plan = plan_replayssm(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache, out,
        ssm_state_indices, write_pos, force_flush, use_qk_l2norm_in_kernel, lower_bound,
        ring_format=ring_format, launches=launches, config=config, check_values=check_values,
    )  # fmt: skip
    run_launches(plan)
    return out, initial_state


def helion_fused_recurrent_kda_packed_decode(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    config: helion.Config | dict | None = None,
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Standard KDA decode (read state, update, write back), in place; same semantics as
    ``replayssm_ref.recurrent_decode_step``. The baseline ReplaySSM is measured against."""
    _check_device(mixed_qkv)
    run_launches(
        plan_standard(
            mixed_qkv,
            a,
            b,
            A_log,
            dt_bias,
            scale,
            initial_state,
            out,
            ssm_state_indices,
            use_qk_l2norm_in_kernel,
            lower_bound,
            config=config,
            check_values=check_values,
        )  # fmt: skip
    )
    return out, initial_state


def helion_fused_recurrent_gdn_replayssm_decode(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    d_cache: torch.Tensor,
    k_cache: torch.Tensor,
    g_cache: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    write_pos: torch.Tensor,
    force_flush: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    *,
    launches: int | None = None,
    config: helion.Config | dict | None = None,
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One ReplaySSM decode step of Gated DeltaNet, in place: ``helion_fused_recurrent_kda_replayssm_decode``
    with one log decay per value head, ``g = -exp(A_log) softplus(a + dt_bias)`` from ``a [B, HV]`` and
    ``dt_bias [HV]``, and the gate ring ``g_cache [slots, HV, L]`` (float32; ``ReplaySSMCache.allocate(...,
    gate="gdn")``). Same semantics as ``replayssm_ref.gdn_replayssm_decode_step``."""
    _check_device(mixed_qkv)
    plan = plan_replayssm(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache, out,
        ssm_state_indices, write_pos, force_flush, use_qk_l2norm_in_kernel, None,
        gate="gdn", launches=launches, config=config, check_values=check_values,
    )  # fmt: skip
    run_launches(plan)
    return out, initial_state


def helion_fused_recurrent_gdn_packed_decode(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    use_qk_l2norm_in_kernel: bool = False,
    *,
    config: helion.Config | dict | None = None,
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Standard Gated DeltaNet decode (read state, update, write back), in place; same semantics as
    ``replayssm_ref.gdn_recurrent_decode_step``. The baseline GDN ReplaySSM is measured against."""
    _check_device(mixed_qkv)
    plan = plan_standard(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, use_qk_l2norm_in_kernel,
        None, gate="gdn", config=config, check_values=check_values,
    )  # fmt: skip
    run_launches(plan)
    return out, initial_state
