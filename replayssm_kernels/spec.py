"""Speculative decoding's public calls (``replayssm_ref.spec``'s signatures and semantics) and their plans.

``helion_kda_replayssm_spec_verify``: two launches, the K side (``kernels.spec_weights``) then the state
side (``kernels.spec_state``). ``helion_kda_replayssm_spec_commit``: the fold or the tree's moves
(``kernels.spec_commit``), then the cursors (``kernels.spec_cursor``). The baseline,
``helion_kda_snapshot_spec_verify`` and ``helion_kda_snapshot_spec_commit``: the standard decode over
the drafts with a snapshot per draft, and the scatter of the accepted one (``kernels.snapshot_verify``).
Every call validates first (``replayssm_ref.validation``); nothing syncs the host afterwards, so a
round is capturable in a CUDA graph with device-side accept counts.
"""

from __future__ import annotations

import helion
import torch

from replayssm_ref.spec import chain_parents
from replayssm_ref.validation import check_kernel_support, validate_spec_commit_inputs, validate_spec_verify_inputs

from .configs import load_entry
from .decode import _check_device
from .kernels.snapshot_verify import SnapshotCommitArgs, SnapshotVerifyArgs, snapshot_commit_body, snapshot_verify_body
from .kernels.spec_commit import SpecCommitArgs, spec_commit_body
from .kernels.spec_cursor import SpecCursorArgs, spec_cursor_body
from .kernels.spec_state import SpecStateArgs, spec_state_body
from .kernels.spec_weights import SpecWeightsArgs, spec_weights_body
from .options import split_entry
from .plan import Launch, _num_slots, gate_fields, ring_chunk, run_launches

RING_TILE = 16  # ring positions per tile of d in the verify's state launch


def _entry(kind, config, device, dtype, key_dim, value_dim, cache_length):
    if config is not None:
        return split_entry(kind, config, (value_dim, key_dim))
    return load_entry(kind, device, dtype, key_dim, value_dim, cache_length)


def _draft_views(mixed_qkv, a, dt_bias, shapes, T):
    B, H, HV, K, V = shapes.batch, shapes.num_q_heads, shapes.num_v_heads, shapes.key_dim, shapes.value_dim
    q = mixed_qkv[..., : H * K].unflatten(2, (H, K))
    k = mixed_qkv[..., H * K : 2 * H * K].unflatten(2, (H, K))
    v = mixed_qkv[..., 2 * H * K :].unflatten(2, (HV, V))
    return q, k, v, a.reshape(B, T, HV, K), dt_bias.reshape(HV, K)


def plan_spec_verify(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache, out, ssm_state_indices,
    write_pos, parents=None, use_qk_l2norm_in_kernel=False, lower_bound=None, *, config=None, check_values=None,
) -> list[Launch]:  # fmt: skip
    spec = validate_spec_verify_inputs(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, parents,
        rings=(d_cache, k_cache, g_cache), write_pos=write_pos, lower_bound=lower_bound, check_values=check_values,
    )  # fmt: skip
    shapes, T = spec.step, spec.num_drafts
    check_kernel_support(shapes, initial_state, out)
    B, HV, K, V, L = shapes.batch, shapes.num_v_heads, shapes.key_dim, shapes.value_dim, shapes.cache_length
    parents = chain_parents(B, T, mixed_qkv.device) if parents is None else parents
    q, k, v, a4, dt2 = _draft_views(mixed_qkv, a, dt_bias, shapes, T)
    f32 = {"device": mixed_qkv.device, "dtype": torch.float32}
    coef, xs, path = (
        torch.empty(B, HV, L, 2 * T, **f32),
        torch.empty(B, HV, 2 * T, K, **f32),
        torch.empty(B, HV, 2, T, T, **f32),
    )
    num_slots = _num_slots(initial_state, d_cache, k_cache, g_cache)
    common = {
        "ssm_state_indices": ssm_state_indices, "write_pos": write_pos, "num_slots": num_slots, "T": T,
        "TP": 1 << (T - 1).bit_length(),
    }  # fmt: skip
    weights = SpecWeightsArgs(
        q_view=q, k_view=k, a4=a4, A_log=A_log, dt2=dt2, parents=parents, k_cache=k_cache, g_cache=g_cache,
        coef=coef, xs=xs, path=path, scale=float(scale), HPQ=shapes.heads_per_q, CH=ring_chunk(L, 8),
        **common, **gate_fields(lower_bound, use_qk_l2norm_in_kernel),
    )  # fmt: skip
    entry = _entry("spec_verify", config, mixed_qkv.device, initial_state.dtype, K, V, L)
    state = SpecStateArgs(
        v_view=v, b=b, initial_state=initial_state, d_cache=d_cache, coef=coef, xs=xs, path=path, out=out,
        RB=min(RING_TILE, 1 << (L - 1).bit_length()), **common,
    )  # fmt: skip
    return [
        Launch("spec_weights", spec_weights_body, helion.Config(block_sizes=[], num_warps=1, num_stages=1), weights),
        Launch("spec_state", spec_state_body, entry.config, state),
    ]


def helion_kda_replayssm_spec_verify(
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
    parents: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    config: helion.Config | dict | None = None,
    check_values: bool | None = None,
) -> torch.Tensor:
    """Verify ``T`` drafts per row from checkpoint + ring (``replayssm_ref.replayssm_spec_verify``):
    writes ``out [B, T, HV, V]`` and the drafts' ring entries at ``c .. c + T - 1``; returns ``out``.
    A row whose slot is outside the pool or whose cursor leaves no room for ``T`` drafts is padding."""
    _check_device(mixed_qkv)
    run_launches(
        plan_spec_verify(
            mixed_qkv,
            a,
            b,
            A_log,
            dt_bias,
            scale,
            initial_state,
            d_cache,
            k_cache,
            g_cache,
            out,
            ssm_state_indices,
            write_pos,
            parents,
            use_qk_l2norm_in_kernel,
            lower_bound,
            config=config,
            check_values=check_values,
        )  # fmt: skip
    )
    return out


def plan_spec_commit(
    initial_state, d_cache, k_cache, g_cache, ssm_state_indices, write_pos, num_accepted, accepted_nodes=None,
    force_flush=None, *, num_drafts, config=None, check_values=None,
) -> list[Launch]:  # fmt: skip
    L = validate_spec_commit_inputs(
        initial_state, (d_cache, k_cache, g_cache), ssm_state_indices, write_pos, num_accepted, accepted_nodes,
        force_flush, num_drafts, check_values=check_values,
    )  # fmt: skip
    _, HV, V, K = initial_state.shape
    entry = _entry("spec_commit", config, initial_state.device, initial_state.dtype, K, V, L)
    num_slots = _num_slots(initial_state, d_cache, k_cache, g_cache)
    has_force = force_flush is not None
    commit = SpecCommitArgs(
        initial_state=initial_state, d_cache=d_cache, k_cache=k_cache, g_cache=g_cache,
        ssm_state_indices=ssm_state_indices, write_pos=write_pos, num_accepted=num_accepted,
        accepted_nodes=accepted_nodes, force_flush=force_flush, num_slots=num_slots, T=num_drafts,
        HPQ=HV // k_cache.shape[1], FK=min(32, K), TREE=accepted_nodes is not None, HAS_FORCE=has_force,
    )  # fmt: skip
    cursor = SpecCursorArgs(
        ssm_state_indices=ssm_state_indices, write_pos=write_pos, num_accepted=num_accepted, force_flush=force_flush,
        num_slots=num_slots, cache_length=L, T=num_drafts, HAS_FORCE=has_force,
    )  # fmt: skip
    return [
        Launch("spec_commit", spec_commit_body, entry.config, commit),
        Launch("spec_cursor", spec_cursor_body, helion.Config(block_sizes=[128], num_warps=4, num_stages=1), cursor),
    ]


def helion_kda_replayssm_spec_commit(
    initial_state: torch.Tensor,
    d_cache: torch.Tensor,
    k_cache: torch.Tensor,
    g_cache: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    write_pos: torch.Tensor,
    num_accepted: torch.Tensor,
    accepted_nodes: torch.Tensor | None = None,
    force_flush: torch.Tensor | None = None,
    *,
    num_drafts: int,
    config: helion.Config | dict | None = None,
    check_values: bool | None = None,
) -> torch.Tensor:
    """Commit the accepted drafts (``replayssm_ref.replayssm_spec_commit``); returns ``write_pos``,
    updated in place on the device."""
    _check_device(initial_state)
    run_launches(
        plan_spec_commit(
            initial_state,
            d_cache,
            k_cache,
            g_cache,
            ssm_state_indices,
            write_pos,
            num_accepted,
            accepted_nodes,
            force_flush,
            num_drafts=num_drafts,
            config=config,
            check_values=check_values,
        )  # fmt: skip
    )
    return write_pos


def plan_snapshot_verify(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, snapshots, parents=None,
    use_qk_l2norm_in_kernel=False, lower_bound=None, *, config=None, check_values=None,
) -> list[Launch]:  # fmt: skip
    spec = validate_spec_verify_inputs(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, parents,
        snapshots=snapshots, lower_bound=lower_bound, check_values=check_values,
    )  # fmt: skip
    shapes, T = spec.step, spec.num_drafts
    check_kernel_support(shapes, initial_state, out)
    q, k, v, a4, dt2 = _draft_views(mixed_qkv, a, dt_bias, shapes, T)
    entry = _entry("snapshot_verify", config, mixed_qkv.device, initial_state.dtype, shapes.key_dim,
                   shapes.value_dim, 1)  # fmt: skip
    args = SnapshotVerifyArgs(
        q_view=q, k_view=k, v_view=v, a4=a4, b=b, A_log=A_log, dt2=dt2, parents=parents, initial_state=initial_state,
        snapshots=snapshots, out=out, ssm_state_indices=ssm_state_indices, num_slots=initial_state.shape[0],
        scale=float(scale), HPQ=shapes.heads_per_q, T=T, CHAIN=parents is None,
        **gate_fields(lower_bound, use_qk_l2norm_in_kernel),
    )  # fmt: skip
    return [Launch("snapshot_verify", snapshot_verify_body, entry.config, args)]


def helion_kda_snapshot_spec_verify(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    snapshots: torch.Tensor,
    parents: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    config: helion.Config | dict | None = None,
    check_values: bool | None = None,
) -> torch.Tensor:
    """The snapshot verify (``replayssm_ref.recurrent_spec_verify``): the baseline."""
    _check_device(mixed_qkv)
    run_launches(
        plan_snapshot_verify(
            mixed_qkv,
            a,
            b,
            A_log,
            dt_bias,
            scale,
            initial_state,
            out,
            ssm_state_indices,
            snapshots,
            parents,
            use_qk_l2norm_in_kernel,
            lower_bound,
            config=config,
            check_values=check_values,
        )  # fmt: skip
    )
    return out


def plan_snapshot_commit(
    initial_state, snapshots, ssm_state_indices, num_accepted, accepted_nodes=None, *, config=None
):
    _, HV, V, K = initial_state.shape
    entry = _entry("snapshot_verify", config, initial_state.device, initial_state.dtype, K, V, 1)
    args = SnapshotCommitArgs(
        initial_state=initial_state, snapshots=snapshots, ssm_state_indices=ssm_state_indices,
        num_accepted=num_accepted, accepted_nodes=accepted_nodes, num_slots=initial_state.shape[0],
        T=snapshots.shape[1], TREE=accepted_nodes is not None,
    )  # fmt: skip
    return [Launch("snapshot_commit", snapshot_commit_body, entry.config, args)]


def helion_kda_snapshot_spec_commit(
    initial_state: torch.Tensor,
    snapshots: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    num_accepted: torch.Tensor,
    accepted_nodes: torch.Tensor | None = None,
    *,
    config: helion.Config | dict | None = None,
) -> torch.Tensor:
    """The snapshot verify's commit (``replayssm_ref.recurrent_spec_commit``): the baseline's scatter."""
    _check_device(initial_state)
    run_launches(plan_snapshot_commit(initial_state, snapshots, ssm_state_indices, num_accepted, accepted_nodes,
                                      config=config))  # fmt: skip
    return initial_state
