"""Random decode problems and multi-step runs against the float64 standard recurrence.

Shared by ``python -m replayssm_ref``, the tests, the kernel checks and the notebooks, so every
comparison in the project is made the same way. ``run_sequence`` steps an implementation beside:

* the float64 **standard recurrence** (the oracle): outputs every step, the checkpoint of every row
  right after its flush, and (``check_materialized``) checkpoint + ring of every row after every step;
* a float64 **shadow ReplaySSM step** on an upcast copy of the implementation's own checkpoint and
  rings: the ring entries it appends must match, and every byte it does not write (other ring
  positions, other slots, padding rows, non-flush checkpoints) must come back bit-identical.

Before every step every ring position at or past its row's cursor is re-poisoned with NaN, and unused
slots hold sentinels, so a stale read shows as NaN and a stray write as a changed bit. Errors are
relative per (row, value head), NaN-aware (a NaN counts as an infinite error), and the worst is kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .cache import ReplaySSMCache
from .gates import gate_channels
from .recurrence import gdn_recurrent_decode_step, recurrent_decode_step
from .replay import (
    _gate_ring4,
    advance_write_pos,
    gdn_replayssm_decode_step,
    materialize_state,
    replayssm_decode_step,
)

SENTINEL = 1e30  # fills state slots no row uses; they must come back bit-identical
DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# Unit roundoff of each storage dtype (half an ulp at 1).
UNIT_ROUNDOFF = {torch.float64: 2.0**-53, torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def tolerance(*dtypes: torch.dtype, steps: int = 1) -> float:
    """The relative error allowed per (row, value head) after ``steps`` decode steps whose values pass
    through ``dtypes`` (state, rings, inputs, output): ``8 u sqrt(steps)``, ``u`` the coarsest unit
    roundoff among them (rounding errors of independent steps add like a random walk), and at least
    5e-5: arithmetic is float32 at best (exp, sums of K and L products), and one (row, head)'s output
    can cancel (the float32 reference reaches 1.1e-5 at L = 16). Written once, used by every test and
    check."""
    u = max(UNIT_ROUNDOFF[d] for d in dtypes)
    return max(8 * u * math.sqrt(max(steps, 1)), 5e-5)


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


def head_errors(x: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(worst relative error, worst absolute error) over the leading two axes (row, head) of ``x`` vs
    ``ref``: each (row, head)'s ``||x - ref|| / ||ref||`` over the remaining axes, in float64. A
    non-finite value in ``x`` makes that (row, head) infinite; empty inputs give (0, 0)."""
    if x.numel() == 0:
        return 0.0, 0.0
    x, ref = x.double(), ref.double()
    diff = (x - ref).flatten(2)
    bad = ~torch.isfinite(diff).all(dim=2)
    diff = torch.where(torch.isfinite(diff), diff, torch.zeros((), dtype=diff.dtype, device=diff.device))
    num = diff.norm(dim=2)
    den = ref.flatten(2).norm(dim=2)
    rel = torch.where(den > 0, num / torch.where(den > 0, den, torch.ones_like(den)), num)
    rel = torch.where(bad, torch.full_like(rel, math.inf), rel)
    absolute = torch.where(bad, torch.full_like(num, math.inf), diff.abs().amax(dim=2))
    return float(rel.max()), float(absolute.max())


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN equals NaN of the same bits): the test for "untouched"."""
    ints = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.contiguous().view(ints[a.element_size()]), b.contiguous().view(ints[b.element_size()]))


@dataclass
class Weights:
    """Per-layer parameters (they do not change between steps)."""

    A_log: torch.Tensor
    dt_bias: torch.Tensor
    scale: float


def random_weights(p: Problem, gen: torch.Generator, device, dtype=torch.float32, *, gate: str = "kda") -> Weights:
    """``A_log [HV]``, ``dt_bias [HV*K]`` (GDN: ``[HV]``) and the usual ``scale``."""
    A_log = torch.log(torch.empty(p.num_v_heads, dtype=torch.float64).uniform_(0.5, 8.0, generator=gen))
    dt_bias = torch.randn(p.num_v_heads * gate_channels(gate, p.key_dim), dtype=torch.float64, generator=gen) * 0.5
    return Weights(A_log.to(device, dtype), dt_bias.to(device, dtype), p.key_dim**-0.5)


def random_token(p: Problem, gen: torch.Generator, device, dtype, *, qk_scale: float = 1.0, gate: str = "kda"):
    """(mixed_qkv, a, b) for one step, drawn fresh (``a [B, HV*K]``, GDN: ``[B, HV]``). ``qk_scale``
    shrinks q/k when l2norm is off."""
    qk = p.num_q_heads * p.key_dim
    mixed = torch.randn(p.batch, p.qkv_width, dtype=torch.float64, generator=gen)
    mixed[:, : 2 * qk] *= qk_scale
    a = torch.randn(p.batch, p.num_v_heads * gate_channels(gate, p.key_dim), dtype=torch.float64, generator=gen)
    b = torch.randn(p.batch, p.num_v_heads, dtype=torch.float64, generator=gen)
    return mixed.to(device, dtype), a.to(device, dtype), b.to(device, dtype)


def random_state(p: Problem, gen: torch.Generator, slots: torch.Tensor, device, dtype) -> torch.Tensor:
    """State pool: random where a row's slot lives, SENTINEL elsewhere."""
    S = torch.full((p.num_slots, p.num_v_heads, p.value_dim, p.key_dim), SENTINEL, dtype=torch.float64)
    S[slots] = torch.randn(p.batch, p.num_v_heads, p.value_dim, p.key_dim, dtype=torch.float64, generator=gen) * 0.5
    return S.to(device, dtype)


def poison_stale(cache: ReplaySSMCache, slots: torch.Tensor) -> None:
    """NaN into every ring position at or past each row's cursor (``slots[row]`` its slot), and into
    every position of slots no row uses: nothing there may be read, and what is not written must stay."""
    L = cache.cache_length
    used = torch.zeros(cache.d_cache.shape[0], dtype=torch.bool, device=cache.d_cache.device)
    used[slots.long()] = True
    stale = torch.ones(cache.d_cache.shape[0], L, dtype=torch.bool, device=cache.d_cache.device)
    pos = torch.arange(L, device=stale.device)
    stale[slots.long()] = pos[None, :] >= cache.write_pos.long()[:, None]
    for ring in (cache.d_cache, cache.k_cache, _gate_ring4(cache.g_cache)):
        ring.masked_fill_(stale[:, None, :, None], float("nan"))


@dataclass
class SequenceResult:
    problem: Problem
    steps: int
    out_rel: float = 0.0  # worst per (row, head), every step, valid rows
    out_abs: float = 0.0
    state_rel: float = 0.0  # flushed checkpoints and (check_materialized) checkpoint + ring vs the oracle
    state_abs: float = 0.0
    ring_rel: float = 0.0  # appended ring entries vs the float64 shadow step
    step_out_rel: list[float] = field(default_factory=list)  # the worst output error of each step
    natural_flushes: int = 0
    forced_flushes: int = 0
    nonfinite: bool = False  # a non-finite output, checkpoint or appended entry
    untouched_ok: bool = True  # everything the step must not write came back bit-identical
    problems: list[str] = field(default_factory=list)  # what went wrong, first few

    @property
    def max_out_rel(self) -> float:
        return self.out_rel

    @property
    def max_state_rel(self) -> float:
        return self.state_rel

    @property
    def max_rel(self) -> float:
        return max(self.out_rel, self.state_rel, self.ring_rel)

    @property
    def max_abs(self) -> float:
        return max(self.out_abs, self.state_abs)

    def note(self, text: str) -> None:
        if len(self.problems) < 5:
            self.problems.append(text)


ReplayFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]


def _float64_copies(state_and_rings) -> list[torch.Tensor]:
    """Float64 copies of a state and its rings for the reference."""
    return [t.to(torch.float64, copy=True) for t in state_and_rings]


def reference_steps(gate: str) -> tuple[Callable, Callable]:
    """(standard step, ReplaySSM step) of the reference for ``gate``."""
    if gate == "gdn":
        return gdn_recurrent_decode_step, gdn_replayssm_decode_step
    return recurrent_decode_step, replayssm_decode_step


def gate_args(use_qk_l2norm: bool, lower_bound: float | None, gate: str) -> tuple:
    """The positional tail of a decode call: ``(l2norm, lower_bound)``, GDN's ``(l2norm,)``."""
    return (use_qk_l2norm,) if gate == "gdn" else (use_qk_l2norm, lower_bound)


def _shadow_step(args: tuple, rings_and_state: tuple, ring_format: str, gate: str) -> tuple:
    """The float64 reference ReplaySSM step on upcast copies of the implementation's state and rings."""
    S, d, k, g = _float64_copies(rings_and_state)
    (mixed, a, b, A_log, dt_bias, scale, out, idx, wp, force, *tail) = args
    out64 = torch.empty_like(out, dtype=torch.float64)
    fmt_kw = {} if gate == "gdn" else {"ring_format": ring_format}
    reference_steps(gate)[1](
        mixed.double(), a.double(), b.double(), A_log.double(), dt_bias.double(), scale, S, d, k, g, out64, idx,
        wp, force, *tail, **fmt_kw,
    )  # fmt: skip
    return S, d, k, g


def run_sequence(
    p: Problem,
    *,
    steps: int,
    seed: int = 0,
    replay_fn: ReplayFn | None = None,
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
    warm: bool = False,
    ring_format: str = "raw",
    gate: str = "kda",
) -> SequenceResult:
    """Step ``replay_fn`` (or, with ``standard=True``, a standard-decode function) beside the float64
    oracle for ``steps`` tokens, with random forced flushes and padded rows.

    ``warm`` starts the rings nearly full: the float64 reference fills each row's ring up to a cursor
    in ``[L - 4, L - 2]`` first (rows staggered by padding), so a long ring wraps within a few steps.
    ``ring_format`` (``replayssm_ref.formats``) is passed to ``replay_fn`` by name unless it is raw.
    ``gate="gdn"`` runs Gated DeltaNet: GDN's gate inputs and rings, the GDN oracle, and ``replay_fn``
    called without ``lower_bound`` (the ``gdn_*`` signatures)."""
    if gate == "gdn" and lower_bound is not None:
        raise ValueError("Gated DeltaNet has no bounded gate: pass lower_bound=None with gate='gdn'")
    oracle_step, reference_replay = reference_steps(gate)
    replay_fn = replay_fn or reference_replay
    tail = gate_args(use_qk_l2norm, lower_bound, gate)
    gen = torch.Generator().manual_seed(seed)
    hi = torch.float64
    cache_dtype = cache_dtype or state_dtype
    input_dtype = input_dtype or (hi if state_dtype is hi else torch.float32)
    out_dtype = out_dtype or (hi if state_dtype is hi else torch.float32)
    qk_scale = 1.0 if use_qk_l2norm else p.key_dim**-0.5
    L = p.cache_length
    if p_force is None:  # enough forced flushes to matter, few enough that rings also fill up
        p_force = min(0.15, 0.5 / L)

    slots = torch.randperm(p.num_slots, generator=gen)[: p.batch]
    w = random_weights(p, gen, device, input_dtype, gate=gate)
    S_test = random_state(p, torch.Generator().manual_seed(seed + 1), slots, device, state_dtype)
    S_ref = S_test.to(hi, copy=True)  # the oracle starts from the same (rounded) state
    cache = ReplaySSMCache.allocate(
        num_slots=p.num_slots, batch=p.batch, num_q_heads=p.num_q_heads, num_v_heads=p.num_v_heads,
        key_dim=p.key_dim, value_dim=p.value_dim, cache_length=L, cache_dtype=cache_dtype, device=device,
        ring_format=ring_format, gate=gate,
    )  # fmt: skip
    res = SequenceResult(p, steps)
    fmt_kw = {} if ring_format == "raw" else {"ring_format": ring_format}  # a seed-signature fn works as is
    slots_dev = slots.to(device=device, dtype=torch.int32)

    def token():
        mixed, a, b = random_token(p, gen, device, input_dtype, qk_scale=qk_scale, gate=gate)
        pad = torch.rand(p.batch, generator=gen) < p_pad
        idx = torch.where(pad, torch.full_like(slots, -1), slots).to(device=device, dtype=torch.int32)
        return mixed, a, b, idx, pad

    if warm and not standard and L > 2:
        # the float64 reference fills the rings (and advances the oracle alike); its entries are then
        # rounded to the cache dtype, which the oracle comparison allows for
        S64, *rings64 = _float64_copies((S_test, cache.d_cache, cache.k_cache, cache.g_cache))
        target = torch.randint(max(0, L - 4), L - 1, (p.batch,), generator=gen).to(device)
        while bool((cache.write_pos < target).any()):
            mixed, a, b, idx, _ = token()
            idx = torch.where(cache.write_pos < target, idx, torch.full_like(idx, -1))
            args = (mixed.to(hi), a.to(hi), b.to(hi), w.A_log.to(hi), w.dt_bias.to(hi), w.scale)
            out64 = torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, dtype=hi, device=device)
            oracle_step(*args, S_ref, out64.clone(), idx, *tail)
            reference_replay(*args, S64, *rings64, out64, idx, cache.write_pos, None, *tail, **fmt_kw)
            advance_write_pos(cache.write_pos, L, None, idx)
        S_test.copy_(S64.to(state_dtype))
        for ring, r64 in zip((cache.d_cache, cache.k_cache, cache.g_cache), rings64, strict=True):
            ring.copy_(r64.to(ring.dtype))

    for _ in range(steps):
        mixed, a, b, idx, pad = token()
        force = ((torch.rand(p.batch, generator=gen) < p_force) & ~pad).to(device, torch.int32)
        force *= torch.randint(1, 3, (p.batch,), generator=gen).to(device, torch.int32)  # any nonzero forces

        out_ref = torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, dtype=hi, device=device)
        oracle_step(
            mixed.to(hi), a.to(hi), b.to(hi), w.A_log.to(hi), w.dt_bias.to(hi), w.scale, S_ref, out_ref, idx, *tail
        )  # fmt: skip

        out = torch.full_like(out_ref, float("nan"), dtype=out_dtype)  # poisoned: every element is written
        valid = idx >= 0
        if standard:
            before = S_test.clone()
            replay_fn(mixed, a, b, w.A_log, w.dt_bias, w.scale, S_test, out, idx, *tail)
            flush_rows = valid.cpu()
            untouched = torch.ones(p.num_slots, dtype=torch.bool, device=device)
            untouched[idx[valid].long()] = False
            if not same_bits(S_test[untouched], before[untouched]):
                res.untouched_ok = False
                res.note("a state slot no valid row uses changed")
        else:
            poison_stale(cache, slots_dev)
            c = cache.write_pos.clone()
            rings = (cache.d_cache, cache.k_cache, cache.g_cache)
            before = [t.clone() for t in (S_test, *rings)]
            args = (mixed, a, b, w.A_log, w.dt_bias, w.scale, out, idx, c, force, *tail)
            shadow = _shadow_step(args, before, ring_format, gate)
            replay_fn(
                mixed, a, b, w.A_log, w.dt_bias, w.scale, S_test, *rings, out, idx, cache.write_pos, force, *tail,
                **fmt_kw,
            )  # fmt: skip
            natural = ((c == L - 1) & valid).cpu()
            forced = ((force != 0) & (c != L - 1) & valid).cpu()
            res.natural_flushes += int(natural.sum())
            res.forced_flushes += int(forced.sum())
            flush_rows = natural | forced
            _check_writes(res, p, slots_dev, idx, c, flush_rows.to(device), before, (S_test, *rings), shadow)
            advance_write_pos(cache.write_pos, L, force, idx)

        res.nonfinite |= not bool(torch.isfinite(out[valid]).all())
        if not bool((out[~valid] == 0).all()):
            res.untouched_ok = False
            res.note("a padding row's output is not zero")
        rel, ab = head_errors(out[valid, 0], out_ref[valid, 0])
        res.step_out_rel.append(rel)
        res.out_rel, res.out_abs = max(res.out_rel, rel), max(res.out_abs, ab)
        if flush_rows.any():
            fs = slots[flush_rows].to(device)
            res.nonfinite |= not bool(torch.isfinite(S_test[fs]).all())
            rel, ab = head_errors(S_test[fs], S_ref[fs])
            res.state_rel, res.state_abs = max(res.state_rel, rel), max(res.state_abs, ab)
        if check_materialized and not standard:
            # after the cursor advance, checkpoint + ring must equal the true post-token state of every row
            S_true = materialize_state(S_test, *rings, slots_dev, cache.write_pos, ring_format=ring_format)
            rel, _ = head_errors(S_true, S_ref[slots_dev.long()])
            res.state_rel = max(res.state_rel, rel)
    return res


def _check_writes(res, p, slots, idx, c, flush, before, after, shadow) -> None:
    """Compare what a ReplaySSM step wrote with the float64 shadow step, and everything else bitwise."""
    S_b, d_b, k_b, g_b = (*before[:3], _gate_ring4(before[3]))  # GDN's gate ring as [slots, HV, L, 1]
    S_a, d_a, k_a, g_a = (*after[:3], _gate_ring4(after[3]))
    d_s, k_s, g_s = (*shadow[1:3], _gate_ring4(shadow[3]))
    valid = idx >= 0
    L = p.cache_length
    # expected writes: flush rows' checkpoints; non-flush rows' ring position c
    state_w = torch.zeros(S_b.shape[0], dtype=torch.bool, device=S_b.device)
    state_w[idx[valid & flush].long()] = True
    ring_w = torch.zeros(S_b.shape[0], L, dtype=torch.bool, device=S_b.device)
    app = valid & ~flush
    ring_w[idx[app].long(), c[app].long()] = True
    if not same_bits(S_a[~state_w], S_b[~state_w]):
        res.untouched_ok = False
        res.note("a checkpoint the step must not write changed")
    for name, b_, a_ in (("d_cache", d_b, d_a), ("k_cache", k_b, k_a), ("g_cache", g_b, g_a)):
        keep = ~ring_w[:, None, :, None].expand_as(b_)
        if not same_bits(a_[keep], b_[keep]):
            res.untouched_ok = False
            res.note(f"{name}: a position the step must not write changed")
    if app.any():
        s, cc = idx[app].long(), c[app].long()
        for a_, s_ in ((d_a, d_s), (k_a, k_s), (g_a, g_s)):
            got, want = a_[s, :, cc], s_[s, :, cc]  # [rows, heads, dim]
            res.nonfinite |= not bool(torch.isfinite(got).all())
            rel, _ = head_errors(got, want)
            res.ring_rel = max(res.ring_rel, rel)
