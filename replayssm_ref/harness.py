"""Random decode problems and multi-step runs against the float64 standard recurrence.

Shared by ``python -m replayssm_ref``, the tests, the kernel checks and the notebooks, so every
comparison in the project is made the same way: ReplaySSM (any implementation, any dtype) is stepped
beside a float64 standard decode on the same rounded inputs; outputs are compared every step, and the
checkpoint of every flushed row right after its flush.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .cache import ReplaySSMCache
from .recurrence import recurrent_decode_step
from .replay import advance_write_pos, materialize_state, replayssm_decode_step

SENTINEL = 1e30  # fills state slots no row uses; they must come back bit-identical


@dataclass(frozen=True)
class Problem:
    batch: int
    num_q_heads: int
    num_v_heads: int
    key_dim: int
    value_dim: int
    cache_length: int
    spare_slots: int = 2  # unused slots, filled with SENTINEL

    @property
    def num_slots(self) -> int:
        return self.batch + self.spare_slots

    @property
    def qkv_width(self) -> int:
        return 2 * self.num_q_heads * self.key_dim + self.num_v_heads * self.value_dim

    def label(self) -> str:
        p = self
        return f"B{p.batch}-H{p.num_q_heads}-HV{p.num_v_heads}-K{p.key_dim}-V{p.value_dim}-L{p.cache_length}"


def relative_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    """||x - ref|| / ||ref|| in float64 (0 when both are empty or zero)."""
    x, ref = x.double(), ref.double()
    denom = ref.norm().item()
    num = (x - ref).norm().item()
    return num / denom if denom > 0 else num


def max_abs_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    return (x.double() - ref.double()).abs().max().item() if x.numel() else 0.0


@dataclass
class Weights:
    """Per-layer parameters (they do not change between steps)."""

    A_log: torch.Tensor
    dt_bias: torch.Tensor
    scale: float


def random_weights(p: Problem, gen: torch.Generator, device, dtype=torch.float32) -> Weights:
    A_log = torch.log(torch.empty(p.num_v_heads, dtype=torch.float64).uniform_(0.5, 8.0, generator=gen))
    dt_bias = torch.randn(p.num_v_heads * p.key_dim, dtype=torch.float64, generator=gen) * 0.5
    return Weights(A_log.to(device, dtype), dt_bias.to(device, dtype), p.key_dim**-0.5)


def random_token(p: Problem, gen: torch.Generator, device, dtype, *, qk_scale: float = 1.0):
    """(mixed_qkv, a, b) for one step, drawn fresh. ``qk_scale`` shrinks q/k when l2norm is off."""
    qk = p.num_q_heads * p.key_dim
    mixed = torch.randn(p.batch, p.qkv_width, dtype=torch.float64, generator=gen)
    mixed[:, : 2 * qk] *= qk_scale
    a = torch.randn(p.batch, p.num_v_heads * p.key_dim, dtype=torch.float64, generator=gen)
    b = torch.randn(p.batch, p.num_v_heads, dtype=torch.float64, generator=gen)
    return mixed.to(device, dtype), a.to(device, dtype), b.to(device, dtype)


def random_state(p: Problem, gen: torch.Generator, slots: torch.Tensor, device, dtype) -> torch.Tensor:
    """State pool: random where a row's slot lives, SENTINEL elsewhere."""
    S = torch.full((p.num_slots, p.num_v_heads, p.value_dim, p.key_dim), SENTINEL, dtype=torch.float64)
    S[slots] = torch.randn(p.batch, p.num_v_heads, p.value_dim, p.key_dim, dtype=torch.float64, generator=gen) * 0.5
    return S.to(device, dtype)


@dataclass
class SequenceResult:
    problem: Problem
    steps: int
    out_rel: list[float] = field(default_factory=list)  # per step, valid rows
    out_abs: list[float] = field(default_factory=list)
    state_rel: list[float] = field(default_factory=list)  # per flush event (checkpoint vs oracle)
    state_abs: list[float] = field(default_factory=list)
    natural_flushes: int = 0
    forced_flushes: int = 0
    nonfinite: bool = False
    untouched_ok: bool = True  # unused slots and padding outputs as required

    @property
    def max_out_rel(self) -> float:
        return max(self.out_rel, default=0.0)

    @property
    def max_state_rel(self) -> float:
        return max(self.state_rel, default=0.0)

    @property
    def max_rel(self) -> float:
        return max(self.max_out_rel, self.max_state_rel)

    @property
    def max_abs(self) -> float:
        return max(self.out_abs + self.state_abs, default=0.0)


ReplayFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]


def run_sequence(
    p: Problem,
    *,
    steps: int,
    seed: int = 0,
    replay_fn: ReplayFn = replayssm_decode_step,
    standard: bool = False,
    state_dtype: torch.dtype = torch.float64,
    cache_dtype: torch.dtype | None = None,
    input_dtype: torch.dtype | None = None,
    out_dtype: torch.dtype | None = None,
    p_force: float | None = None,
    p_pad: float = 0.1,
    use_qk_l2norm: bool = True,
    lower_bound: float | None = None,
    device: str | torch.device = "cpu",
    check_materialized: bool = False,
) -> SequenceResult:
    """Step ``replay_fn`` (or, with ``standard=True``, a standard-decode function) beside the float64
    standard recurrence for ``steps`` tokens, with random forced flushes and padded rows."""
    gen = torch.Generator().manual_seed(seed)
    hi = torch.float64
    cache_dtype = cache_dtype or state_dtype
    input_dtype = input_dtype or (hi if state_dtype is hi else torch.float32)
    out_dtype = out_dtype or (hi if state_dtype is hi else torch.float32)
    qk_scale = 1.0 if use_qk_l2norm else p.key_dim**-0.5
    if p_force is None:  # enough forced flushes to matter, few enough that rings also fill up
        p_force = min(0.15, 0.5 / p.cache_length)

    slots = torch.randperm(p.num_slots, generator=gen)[: p.batch]
    w = random_weights(p, gen, device, input_dtype)
    S_test = random_state(p, torch.Generator().manual_seed(seed + 1), slots, device, state_dtype)
    S_ref = S_test.to(hi, copy=True)  # the oracle starts from the same (rounded) state
    spare = torch.ones(p.num_slots, dtype=torch.bool)
    spare[slots] = False
    spare_before = S_test[spare.to(device)].clone()
    cache = ReplaySSMCache.allocate(
        num_slots=p.num_slots, batch=p.batch, num_q_heads=p.num_q_heads, num_v_heads=p.num_v_heads,
        key_dim=p.key_dim, value_dim=p.value_dim, cache_length=p.cache_length, cache_dtype=cache_dtype,
        device=device,
    )  # fmt: skip
    res = SequenceResult(p, steps)
    L = p.cache_length

    for _ in range(steps):
        mixed, a, b = random_token(p, gen, device, input_dtype, qk_scale=qk_scale)
        pad = torch.rand(p.batch, generator=gen) < p_pad
        idx = torch.where(pad, torch.full_like(slots, -1), slots).to(device=device, dtype=torch.int32)
        force = ((torch.rand(p.batch, generator=gen) < p_force) & ~pad).to(device, torch.int32)
        force *= torch.randint(1, 3, (p.batch,), generator=gen).to(device, torch.int32)  # any nonzero forces

        out_ref = torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, dtype=hi, device=device)
        recurrent_decode_step(
            mixed.to(hi), a.to(hi), b.to(hi), w.A_log.to(hi), w.dt_bias.to(hi), w.scale, S_ref, out_ref, idx,
            use_qk_l2norm, lower_bound,
        )  # fmt: skip

        out = torch.full_like(out_ref, float("nan"), dtype=out_dtype)  # poisoned: every element is written
        if standard:
            replay_fn(mixed, a, b, w.A_log, w.dt_bias, w.scale, S_test, out, idx, use_qk_l2norm, lower_bound)
            flush_rows = (idx >= 0).cpu()
        else:
            c = cache.write_pos.clone()
            replay_fn(
                mixed, a, b, w.A_log, w.dt_bias, w.scale, S_test, cache.d_cache, cache.k_cache, cache.g_cache,
                out, idx, cache.write_pos, force, use_qk_l2norm, lower_bound,
            )  # fmt: skip
            natural = ((c == L - 1) & (idx >= 0)).cpu()
            forced = ((force != 0) & (c != L - 1) & (idx >= 0)).cpu()
            res.natural_flushes += int(natural.sum())
            res.forced_flushes += int(forced.sum())
            flush_rows = natural | forced
            advance_write_pos(cache.write_pos, L, force, idx)

        valid = idx >= 0
        res.nonfinite |= not bool(torch.isfinite(out).all())
        res.untouched_ok &= bool((out[~valid] == 0).all())
        res.out_rel.append(relative_error(out[valid], out_ref[valid]))
        res.out_abs.append(max_abs_error(out[valid], out_ref[valid]))
        if flush_rows.any():
            fs = slots[flush_rows].to(device)
            res.state_rel.append(relative_error(S_test[fs], S_ref[fs]))
            res.state_abs.append(max_abs_error(S_test[fs], S_ref[fs]))
        if check_materialized and not standard:
            # After the cursor advance, checkpoint + ring must equal the true post-token state of every row.
            all_rows = slots.to(device=device, dtype=torch.int32)
            S_true = materialize_state(S_test, cache.d_cache, cache.k_cache, cache.g_cache, all_rows, cache.write_pos)
            res.state_rel.append(relative_error(S_true, S_ref[all_rows.long()]))

    res.untouched_ok &= bool(torch.equal(S_test[spare.to(device)], spare_before))
    return res
