"""Launch planning: a decode step as a list of :class:`Launch` records, validated and configured, not run.

``plan_replayssm`` and ``plan_standard`` take the public functions' arguments, validate them with
``replayssm_ref.validation`` (nothing is launched before that passes), pick the design and its table
entry, and build each launch's argument record by name. ``run_launches`` runs a plan; the measuring
tools (``replayssm_kernels.tools``) time, profile and compile the same records.

Designs (``launches=``): ``0`` the standard kernel (L = 1 only, where every step flushes from an
empty ring); ``1`` one fused launch (``kernels.fused``: GDN or the predecayed format only); ``2``
ring weights, then state with the flush; ``3`` ring weights, state, then the flush
rows' checkpoints (per row, or ``flush_programs`` programs over the flushing rows, optionally beside
the state launch on a second stream); ``None`` picks 0 at L = 1, 1 where the device table's one-launch rule
covers the ring (``default_launches``), else 3 from its ``split_flush_from_l`` on and 2 below it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import helion
import torch

from replayssm_ref.formats import ring_format as ring_format_record
from replayssm_ref.validation import (
    DecodeShapes,
    check_kernel_support,
    validate_decode_inputs,
    validate_replayssm_inputs,
)

from .configs import load_entry, one_launch_rule, ring_block, split_flush_from
from .kernels.common import DOT_MIN
from .kernels.flush import FlushArgs, flush_body
from .kernels.flush_rows import MAX_BATCH, FlushRowsArgs, flush_rows_body
from .kernels.fused import FUSED_RING_TILE, FusedArgs, fused_body
from .kernels.ring_weights import RingWeightsArgs, ring_weights_body
from .kernels.standard import StandardArgs, standard_body
from .kernels.state import RING_TILE, StateArgs, state_body
from .options import Entry, KernelOptions, split_entry

LAUNCH_KINDS = {0: "standard", 1: "replayssm_fused", 2: "replayssm", 3: "replayssm_split"}  # launches= -> table kind


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a decode step: its name, body, fixed Helion config and argument record."""

    name: str  # "ring_weights", "state", "flush", "flush_rows", "fused" or "standard"
    body: Callable
    config: helion.Config | None  # None: Helion autotunes (the tuner's --search helion only)
    args: object  # the body's *Args record
    # 0: after the launch before it. 1 or 2: at the same time as it, on a second stream (2: of high
    # priority), started first; the step ends when both are done (run_launches; in order off CUDA)
    beside: int = 0

    def kwargs(self) -> dict:
        """The call's arguments by name (a shallow copy of the record: tensors stay tensors)."""
        return {f.name: getattr(self.args, f.name) for f in dataclasses.fields(self.args)}

    def kernel(self):
        return _kernel(self.body, self.config)

    def __call__(self):
        return self.kernel()(**self.kwargs())

    @property
    def device(self) -> torch.device:
        return next(v for v in self.kwargs().values() if isinstance(v, torch.Tensor)).device


@functools.cache
def _kernel(body: Callable, config: helion.Config | None):
    """The Helion kernel for ``body`` with a fixed config, built once per (body, config)."""
    kwargs = {"static_shapes": False}
    if config is not None:
        kwargs["config"] = config
    return helion.kernel(**kwargs)(body)


def default_launches(
    cache_length: int, device: torch.device | str = "cpu", *, gate: str = "kda", predecayed: bool = False,
    batch: int = 1,
) -> int:  # fmt: skip
    """The design ``launches=None`` runs: 0 at L = 1; 1 where the device table's one-launch rule covers
    the ring (``configs.one_launch_rule``: the predecayed format, or GDN up to a batch size, up to an L);
    3 from ``split_flush_from(device)`` on; else 2."""
    if cache_length == 1:
        return 0
    up_to_l, gdn_batch = one_launch_rule(device)
    if cache_length <= up_to_l and (predecayed or (gate == "gdn" and batch <= gdn_batch)):
        return 1
    return 3 if cache_length >= split_flush_from(device) else 2


def ring_chunk(cache_length: int, most: int) -> int:
    """Ring positions per unrolled chunk: the largest power of two at most ``most`` dividing L."""
    ch = 1
    while ch * 2 <= most and cache_length % (ch * 2) == 0:
        ch *= 2
    return ch


def flush_ring_tile(cache_length: int, options: KernelOptions, block_v: int, flush_block_k: int) -> int:
    """Ring positions per tile of a flush by tiles, or 0 for the walk: ``flush_tiles`` clamped to
    ``[DOT_MIN, ring_block(L)]``, and 0 where the V or K tile is narrower than a dot's side."""
    if not options.flush_tiles or block_v < DOT_MIN or flush_block_k < DOT_MIN:
        return 0
    return max(DOT_MIN, min(options.flush_tiles, ring_block(cache_length)))


def _resolve(kind: str, config, device, dtype, shapes: DecodeShapes) -> Entry:
    """An explicit ``helion.Config`` or table-style dict, else the tuned table's entry."""
    dims = (shapes.value_dim,) if kind == "standard" else (shapes.value_dim, shapes.key_dim)
    if config is None:
        return load_entry(kind, device, dtype, shapes.key_dim, shapes.value_dim, shapes.cache_length)
    return split_entry(kind, config, dims)


def _views(mixed_qkv: torch.Tensor, a: torch.Tensor, dt_bias: torch.Tensor, shapes: DecodeShapes):
    """Zero-copy per-head views of the packed inputs: q, k [B, H, K], v [B, HV, V], a [B, HV, G],
    dt [HV, G], with G = K (KDA) or 1 (GDN: ``kernels.common.gate_channel``)."""
    B, H, HV, K, V = shapes.batch, shapes.num_q_heads, shapes.num_v_heads, shapes.key_dim, shapes.value_dim
    G = shapes.gate_channels
    q_view = mixed_qkv[:, : H * K].unflatten(1, (H, K))
    k_view = mixed_qkv[:, H * K : 2 * H * K].unflatten(1, (H, K))
    v_view = mixed_qkv[:, 2 * H * K :].unflatten(1, (HV, V))
    return q_view, k_view, v_view, a.view(B, HV, G), dt_bias.view(HV, G)


def _gate_ring(g_cache: torch.Tensor) -> torch.Tensor:
    """The gate ring as the kernels index it, ``[slots, HV, L, G]`` (GDN's ``[slots, HV, L]`` viewed)."""
    return g_cache.unsqueeze(-1) if g_cache.ndim == 3 else g_cache


def _num_slots(*pools: torch.Tensor) -> int:
    """Slots every pool holds: a row whose slot is outside ``[0, this)`` is treated as padding."""
    return min(t.size(0) for t in pools)


def gate_fields(lower_bound, use_qk_l2norm_in_kernel) -> dict:
    """The token-gate arguments every body that computes a gate takes (also ``replayssm_kernels.spec``)."""
    return {
        "lower_bound": 0.0 if lower_bound is None else float(lower_bound),
        "USE_L2NORM": bool(use_qk_l2norm_in_kernel),
        "BOUNDED": lower_bound is not None,
    }


def plan_standard(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
    use_qk_l2norm_in_kernel=False, lower_bound=None, *, gate="kda", config=None, check_values=None,
) -> list[Launch]:  # fmt: skip
    """The one launch of a standard decode step (arguments of ``helion_fused_recurrent_kda_packed_decode``;
    ``gate="gdn"``: of ``helion_fused_recurrent_gdn_packed_decode``)."""
    shapes = validate_decode_inputs(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, gate=gate,
        check_values=check_values,
    )  # fmt: skip
    check_kernel_support(shapes, initial_state, out)
    return _standard_plan(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
        use_qk_l2norm_in_kernel, lower_bound, shapes, config, _num_slots(initial_state), None,
    )  # fmt: skip


def _standard_plan(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
    use_qk_l2norm_in_kernel, lower_bound, shapes, config, num_slots, write_pos,
) -> list[Launch]:  # fmt: skip
    entry = _resolve("standard", config, mixed_qkv.device, initial_state.dtype, shapes)
    q_view, k_view, v_view, a3, dt2 = _views(mixed_qkv, a, dt_bias, shapes)
    args = StandardArgs(
        q_view=q_view, k_view=k_view, v_view=v_view, a3=a3, b=b, A_log=A_log, dt2=dt2,
        initial_state=initial_state, out=out, ssm_state_indices=ssm_state_indices, write_pos=write_pos,
        num_slots=num_slots, scale=float(scale), HPQ=shapes.heads_per_q, HAS_CURSOR=write_pos is not None,
        **gate_fields(lower_bound, use_qk_l2norm_in_kernel), HEAD_GATE=shapes.gate == "gdn",
    )  # fmt: skip
    return [Launch("standard", standard_body, entry.config, args)]


def _state_configs(entry: Entry, split: bool, ring_once: bool) -> tuple[helion.Config, helion.Config]:
    """(state launch, per-row flush launch) Helion configs from one entry.

    ``k_stages`` pipelines the state launch's loop over checkpoint K chunks, ``flush_k_stages`` (two
    launches) its flush's loop over K steps: positions in Helion's ``range_num_stages``, one per device
    loop in body order ([grid, ring d tiles (not with RING_ONCE), K chunks, flush K steps, flush ring,
    append] with the flush, [grid, ring, K chunks, append] without). The flush launch takes the entry
    without ``range_*`` lists, its V tile only, with ``flush_block_v`` / ``flush_warps`` where set."""
    opts = entry.options
    fields = {k: v for k, v in dict(entry.config).items() if not k.startswith("range_")}
    flush_fields = dict(fields, block_sizes=[opts.flush_block_v or fields["block_sizes"][0]])
    if opts.flush_warps:
        flush_fields["num_warps"] = opts.flush_warps
    state = dict(entry.config)
    stages = [0] * ((4 if split else 6) - ring_once)
    stages[2 - ring_once] = opts.k_stages  # as 0 and 1, 1 and below mean none
    if not split:
        stages[3 - ring_once] = opts.flush_k_stages
    if max(stages) > 1:
        state["range_num_stages"] = stages
    return helion.Config(**state), helion.Config(**flush_fields)


def plan_replayssm(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache, out,
    ssm_state_indices, write_pos, force_flush=None, use_qk_l2norm_in_kernel=False, lower_bound=None,
    *, gate="kda", ring_format="raw", launches=None, config=None, check_values=None,
) -> list[Launch]:  # fmt: skip
    """The launches of one ReplaySSM step (arguments of ``helion_fused_recurrent_kda_replayssm_decode``;
    ``gate="gdn"``: of ``helion_fused_recurrent_gdn_replayssm_decode``)."""
    shapes = validate_replayssm_inputs(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache,
        out, ssm_state_indices, write_pos, force_flush, ring_format=ring_format, lower_bound=lower_bound,
        gate=gate, check_values=check_values,
    )  # fmt: skip
    g_cache = _gate_ring(g_cache)
    predecayed = ring_format_record(ring_format).prefix_gate
    check_kernel_support(shapes, initial_state, out)
    if launches is None:
        launches = default_launches(
            shapes.cache_length, mixed_qkv.device, gate=shapes.gate, predecayed=predecayed, batch=shapes.batch
        )  # fmt: skip
    if launches not in LAUNCH_KINDS:
        raise ValueError(
            "`launches` must be None (the device's default), 1 (one fused launch: GDN or the predecayed "
            "format), 2 (ring weights, then state), 3 (ring weights, state, then the flush rows' checkpoints) "
            f"or 0 (the standard kernel, cache_length 1 only); got {launches!r}"
        )
    num_slots = _num_slots(initial_state, d_cache, k_cache, g_cache)
    if launches == 0:
        if shapes.cache_length != 1:
            raise ValueError(
                "`launches=0` runs the standard decode kernel, which is a ReplaySSM step only when every "
                f"step flushes from an empty ring: cache_length 1; the rings have cache_length "
                f"{shapes.cache_length} (d_cache {tuple(d_cache.shape)}). Use launches=None, 2 or 3."
            )
        # every step flushes with c = 0: S0 <- S0 diag(alpha) + u k^T, nothing appended; a row whose
        # cursor is not 0 (the only valid one at L = 1) is padding, as in the replay kernels
        return _standard_plan(
            mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
            use_qk_l2norm_in_kernel, lower_bound, shapes, config, num_slots, write_pos,
        )  # fmt: skip

    if launches == 1:
        return _fused_plan(
            mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache, out,
            ssm_state_indices, write_pos, force_flush, use_qk_l2norm_in_kernel, lower_bound, shapes, predecayed,
            config, num_slots,
        )  # fmt: skip

    split = launches == 3
    entry = _resolve(LAUNCH_KINDS[launches], config, mixed_qkv.device, initial_state.dtype, shapes)
    opts = entry.options
    B, HV, K, V, L = shapes.batch, shapes.num_v_heads, shapes.key_dim, shapes.value_dim, shapes.cache_length
    q_view, k_view, v_view, a3, dt2 = _views(mixed_qkv, a, dt_bias, shapes)
    f32 = {"device": mixed_qkv.device, "dtype": torch.float32}
    coef, xs, qk = torch.empty(B, HV, 2, L, **f32), torch.empty(B, HV, 2, K, **f32), torch.empty(B, HV, **f32)
    decay = torch.empty(B, HV, K, **f32)
    once = ring_block(L) <= RING_TILE
    state_config, flush_config = _state_configs(entry, split, once)
    fk = min(opts.flush_block_k, K)
    flush_v = (flush_config if split else state_config).block_sizes[0]
    fw = flush_ring_tile(L, opts, flush_v, fk)  # 0: the flush walks the ring
    rows = split and fw > 0 and opts.flush_programs > 0 and B <= MAX_BATCH  # launch 3 over the flush rows
    overlap = opts.flush_overlap if rows else 0
    hand_w = fw > 0 and bool(opts.flush_weights) and (rows or not split)
    w_ring = torch.empty(B, HV, L, K, **f32) if hand_w else None
    u_buf = torch.empty(B, HV, V, **f32) if split and not overlap else None
    common = {
        "ssm_state_indices": ssm_state_indices, "write_pos": write_pos, "force_flush": force_flush,
        "num_slots": num_slots, "HAS_FORCE": force_flush is not None,
        "HPQ": shapes.heads_per_q, "PREDECAYED": predecayed,
    }  # fmt: skip
    g_walk = None if predecayed else g_cache  # what a flush that reads the ring itself takes
    gate_kw = gate_fields(lower_bound, use_qk_l2norm_in_kernel) | {"HEAD_GATE": shapes.gate == "gdn"}
    ch = ring_chunk(L, opts.ring_chunk)

    weights_fields = {"block_sizes": [], "num_warps": 1, "num_stages": 1}
    if opts.prep_stages > 1:  # the loops: [grid, ring chunks, append]
        weights_fields["range_num_stages"] = [0, opts.prep_stages, 0]
    weights = RingWeightsArgs(
        q_view=q_view, k_view=k_view, a3=a3, b=b, A_log=A_log, dt2=dt2, k_cache=k_cache, g_cache=g_cache,
        coef=coef, xs=xs, qk=qk, decay=decay, w_ring=w_ring, scale=float(scale), CH=ch, HAND_W=hand_w,
        **common, **gate_kw,
    )  # fmt: skip
    plan = [Launch("ring_weights", ring_weights_body, helion.Config(**weights_fields), weights)]

    walked = not split and not hand_w  # a two-launch step whose state launch walks the ring to flush
    gated = walked and not predecayed  # ... and computes the token's gate for it
    state = StateArgs(
        k_view=k_view, v_view=v_view, b=b, initial_state=initial_state, state_out=initial_state, d_cache=d_cache,
        a3=a3 if gated else None, A_log=A_log if gated else None, dt2=dt2 if gated else None,
        k_cache=k_cache if walked else None, g_cache=g_walk if walked else None,
        coef=coef, xs=xs, qk=qk, decay=None if split else decay, w_ring=w_ring if not split else None,
        u_buf=u_buf, out=out, RB=min(ring_block(L), RING_TILE), RING_ONCE=once, CH=ch, FK=fk,
        FW=max(fw, DOT_MIN), FLUSH_HERE=not split, HAND_W=hand_w and not split, SKIP_FLUSH=bool(overlap),
        **common, **gate_kw,
    )  # fmt: skip
    plan.append(Launch("state", state_body, state_config, state))

    if rows:
        rows_config = helion.Config(block_sizes=[], num_warps=flush_config.num_warps, num_stages=1)
        flush_rows = FlushRowsArgs(
            k_view=k_view, a3=a3, A_log=A_log, dt2=dt2, initial_state=initial_state, d_cache=d_cache,
            k_cache=k_cache, g_cache=g_walk, decay=decay, w_ring=w_ring, u_buf=u_buf, v_view=v_view, b=b,
            coef=coef, xs=xs, qk=qk, out=out, P=opts.flush_programs, FK=fk, FW=fw, BV=flush_config.block_sizes[0],
            BB=ring_block(B), LB=ring_block(L), OWN=bool(overlap), HAND_W=hand_w, **common, **gate_kw,
        )  # fmt: skip
        plan.append(Launch("flush_rows", flush_rows_body, rows_config, flush_rows, beside=overlap))
    elif split:
        flush = FlushArgs(
            k_view=k_view, a3=a3, A_log=A_log, dt2=dt2, initial_state=initial_state, d_cache=d_cache,
            k_cache=k_cache, g_cache=g_walk, decay=decay, u_buf=u_buf, CH=ch, FK=fk,
            **common, **gate_kw,
        )  # fmt: skip
        plan.append(Launch("flush", flush_body, flush_config, flush))
    return plan


def _fused_plan(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache, out, ssm_state_indices,
    write_pos, force_flush, use_qk_l2norm_in_kernel, lower_bound, shapes, predecayed, config, num_slots,
) -> list[Launch]:  # fmt: skip
    """The one launch of ``launches=1`` (``kernels.fused``)."""
    if not (predecayed or shapes.gate == "gdn"):
        raise ValueError(
            "`launches=1` (one fused launch) serves rings whose entry weights need no per-channel work: "
            "Gated DeltaNet, or KDA with ring_format='predecayed'; KDA's raw ring needs launch 1's weights: "
            "use launches=None, 2 or 3"
        )
    entry = _resolve("replayssm_fused", config, mixed_qkv.device, initial_state.dtype, shapes)
    opts, L, K = entry.options, shapes.cache_length, shapes.key_dim
    once = ring_block(L) <= FUSED_RING_TILE
    fields = dict(entry.config)
    stages = [0] * (6 - once)  # [grid, ring tiles (not once), K chunks, flush K steps, flush ring, append]
    stages[2 - once] = opts.k_stages
    if max(stages) > 1:
        fields["range_num_stages"] = stages
    q_view, k_view, v_view, a3, dt2 = _views(mixed_qkv, a, dt_bias, shapes)
    args = FusedArgs(
        q_view=q_view, k_view=k_view, v_view=v_view, a3=a3, b=b, A_log=A_log, dt2=dt2, initial_state=initial_state,
        state_out=initial_state, d_cache=d_cache, k_cache=k_cache, g_cache=g_cache, out=out,
        ssm_state_indices=ssm_state_indices, write_pos=write_pos, force_flush=force_flush, num_slots=num_slots,
        scale=float(scale), **gate_fields(lower_bound, use_qk_l2norm_in_kernel), HAS_FORCE=force_flush is not None,
        HPQ=shapes.heads_per_q, RB=min(ring_block(L), FUSED_RING_TILE), LB=ring_block(L), RING_ONCE=once,
        CH=ring_chunk(L, opts.ring_chunk), FK=min(opts.flush_block_k, K), PREDECAYED=predecayed,
        HEAD_GATE=shapes.gate == "gdn",
    )  # fmt: skip
    return [Launch("fused", fused_body, helion.Config(**fields), args)]


@functools.cache
def _side_stream(device: torch.device, priority: int) -> torch.cuda.Stream:
    """The second stream of ``run_launches``, one per (device, ``beside`` priority), made once."""
    return torch.cuda.Stream(device, priority=-1 if priority == 2 else 0)


def launch_groups(plan: list[Launch], concurrent: bool) -> list[tuple[Launch, ...]]:
    """A step's launches as groups run one after the other. With ``concurrent``, a launch marked
    ``beside`` forms a group with the launch ahead of it, ``(beside, ahead)``: the two run at once.
    Without it (off CUDA) every group is one launch, in plan order."""
    groups, i = [], 0
    while i < len(plan):
        if concurrent and i + 1 < len(plan) and plan[i + 1].beside:
            groups.append((plan[i + 1], plan[i]))
            i += 2
        else:
            groups.append((plan[i],))
            i += 1
    return groups


def run_launches(plan: list[Launch]) -> None:
    """Run a step's launches. In a group of two the ``beside`` launch starts first, on a second stream
    that waits for the work before it; the other runs on the current stream, which then waits for both
    (they touch disjoint data: ``kernels.flush_rows``'s ``OWN``). Works under CUDA graph capture."""
    device = plan[0].device
    for group in launch_groups(plan, device.type == "cuda"):
        if len(group) == 1:
            group[0]()
            continue
        beside, ahead = group
        main, side = torch.cuda.current_stream(device), _side_stream(device, beside.beside)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            beside()
        ahead()
        main.wait_stream(side)
