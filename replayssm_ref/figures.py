"""Sweeps and figures for the notebooks, on the reference (CPU or GPU). One function per figure.

Each sweep returns a tidy pandas DataFrame (one row per measurement); each ``plot_*`` draws one figure
from such a frame, saves it where given a path, and returns it (a notebook shows it inline; no
backend is forced here). ``RESULTS`` is the repository's results folder, found from the package, so a
notebook finds it from any working directory.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
import torch

from .cache import ReplaySSMCache
from .formats import ring_format
from .harness import DTYPES, Problem, random_token, random_weights, reference_steps, run_sequence, tolerance
from .recurrence import recurrent_decode_step
from .replay import advance_write_pos, materialize_state
from .traffic import TrafficShape, replay_cycle_bytes_per_row, standard_bytes_per_row

RESULTS = Path(__file__).resolve().parent.parent / "results"


def finish(fig, path):
    """Lay out, save to ``path`` (if given) and return ``fig``."""
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    return fig


def log2_x(ax, lengths, label="ring length L (tokens)"):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(set(lengths)))
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xlabel(label)


# ---- notebook 01: the semantics, step by step -------------------------------------------------------


def semantics_trace(
    p: Problem, steps: int, forced: dict[int, list[int]] | None = None, seed: int = 0, gate: str = "kda"
) -> tuple[pd.DataFrame, ReplaySSMCache]:
    """Step a float64 ReplaySSM beside the standard recurrence of ``gate``; one row per (step, row).

    ``forced`` maps a step to the rows forced to flush there. Columns: cursor before the step, the
    event (append / natural flush / forced flush), ring entries held after it, and the error of
    ``materialize_state`` (checkpoint + ring) against the standard recurrence's state after the step.
    """
    forced = forced or {}
    gen = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    w = random_weights(p, gen, "cpu", f64, gate=gate)
    standard_step, replay_step = reference_steps(gate)
    idx = torch.arange(p.batch, dtype=torch.int32)
    S0 = torch.randn(p.num_slots, p.num_v_heads, p.value_dim, p.key_dim, generator=gen, dtype=f64) * 0.5
    S_std = S0.clone()
    cache = ReplaySSMCache.allocate(
        num_slots=p.num_slots, batch=p.batch, num_q_heads=p.num_q_heads, num_v_heads=p.num_v_heads,
        key_dim=p.key_dim, value_dim=p.value_dim, cache_length=p.cache_length, cache_dtype=f64, gate=gate,
    )  # fmt: skip
    out, out_std = (torch.empty(p.batch, 1, p.num_v_heads, p.value_dim, dtype=f64) for _ in range(2))
    rows = []
    for step in range(steps):
        mixed, a, b = random_token(p, gen, "cpu", f64, gate=gate)
        force = torch.zeros(p.batch, dtype=torch.int32)
        force[forced.get(step, [])] = 1
        c = cache.write_pos.clone()
        standard_step(mixed, a, b, w.A_log, w.dt_bias, w.scale, S_std, out_std, idx, True)
        replay_step(
            mixed, a, b, w.A_log, w.dt_bias, w.scale, S0, cache.d_cache, cache.k_cache, cache.g_cache, out, idx,
            cache.write_pos, force, True,
        )  # fmt: skip
        advance_write_pos(cache.write_pos, p.cache_length, force, idx)
        state = materialize_state(S0, cache.d_cache, cache.k_cache, cache.g_cache, idx, cache.write_pos)
        for r in range(p.batch):
            event = "forced flush" if force[r] and c[r] != p.cache_length - 1 else "append"
            event = "natural flush" if c[r] == p.cache_length - 1 else event
            err = (state[r] - S_std[r]).abs().max().item()
            rows.append({"step": step, "row": r, "cursor": int(c[r]), "event": event,
                         "entries_after": int(cache.write_pos[r]), "state_max_abs_err": err,
                         "out_max_abs_err": (out[r] - out_std[r]).abs().max().item()})  # fmt: skip
    return pd.DataFrame(rows), cache


def plot_ring_occupancy(trace: pd.DataFrame, cache_length: int, path=None):
    """Ring entries held by each row over time, with flush events marked."""
    fig, ax = plt.subplots(figsize=(10, 3.4))
    for r, g in trace.groupby("row"):
        ax.step(g.step, g.entries_after, where="post", label=f"row {r}")
        for event, marker in (("natural flush", "v"), ("forced flush", "x")):
            e = g[g.event == event]
            ax.plot(e.step, e.entries_after, marker, ms=9, color="k", ls="none", label=event if r == 0 else None)
    ax.axhline(cache_length - 1, color="grey", ls=":", lw=1, label="L - 1: next step flushes")
    ax.set_xlabel("decode step")
    ax.set_ylabel("committed ring entries")
    ax.set_title("Ring occupancy: entries accumulate, a flush folds them into the checkpoint", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return finish(fig, path)


def bytes_model_frame(lengths, shape: TrafficShape | None = None, ring_formats=("raw",)) -> pd.DataFrame:
    """Model bytes per step per row (cycle average) vs L for fp32 and bf16 state, per ring format, and
    standard decode, for the gate of ``shape`` (KDA unless told; GDN runs the raw format only)."""
    rows = []
    t0 = shape or TrafficShape(32, 32, 128, 128)
    formats = ring_formats if t0.gate == "kda" else ("raw",)
    for sb, name in ((4, "float32"), (2, "bfloat16")):
        for fmt in formats:
            t = TrafficShape(t0.num_q_heads, t0.num_v_heads, t0.key_dim, t0.value_dim, state_bytes=sb, ring_format=fmt,
                             gate=t0.gate)  # fmt: skip
            for L in lengths:
                rows.append({"gate": t0.gate, "state_dtype": name, "cache_length": L, "impl": "replayssm",
                             "ring_format": fmt, "bytes_per_row": replay_cycle_bytes_per_row(t, L)})  # fmt: skip
        rows.append({"gate": t0.gate, "state_dtype": name, "cache_length": 0, "impl": "standard", "ring_format": "",
                     "bytes_per_row": standard_bytes_per_row(t)})  # fmt: skip
    return pd.DataFrame(rows)


def plot_bytes_model(frame: pd.DataFrame, path=None, title="HV=32, K=V=128"):
    fig, ax = plt.subplots(figsize=(9, 3.6))
    rep = frame[frame.impl == "replayssm"]
    styles = {"raw": "o-", "predecayed": "^-."}
    for i, (sd, gs) in enumerate(rep.groupby("state_dtype")):
        for fmt, g in gs.groupby("ring_format"):
            ax.plot(g.cache_length, g.bytes_per_row / 1e6, styles.get(fmt, "o-"), color=f"C{i}",
                    label=f"ReplaySSM, {sd} state, {fmt} bf16 rings")  # fmt: skip
        std = frame[(frame.impl == "standard") & (frame.state_dtype == sd)].bytes_per_row.iloc[0]
        ax.axhline(std / 1e6, ls="--", color=f"C{i}", label=f"standard decode, {sd} state")
    log2_x(ax, rep.cache_length)
    ax.set_ylabel("MB moved per row per step (cycle avg)")
    ax.set_title(f"Traffic model, {title} (inputs/outputs included)", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return finish(fig, path)


# ---- notebook 02: correctness -----------------------------------------------------------------------


def error_sweep(
    cache_lengths, heads, dtypes=("float32", "bfloat16"), *, dims=(16, 32), batch=4, seed=0, replay_fn=None,
    label="reference", device="cpu", steps=None, ring_formats=("raw",), lower_bound=None, gates=("kda",),
) -> pd.DataFrame:  # fmt: skip
    """Worst relative error per (row, head) and max abs error against the float64 standard recurrence,
    per (gate, L, HV, dtype, ring format); a format the gate or L does not allow is left out.

    ``gates``: ``"kda"`` (with ``lower_bound``, every format) and/or ``"gdn"`` (Gated DeltaNet: the
    softplus gate, raw rings); ``replay_fn``: one function, or one per gate (a dict)."""
    rows = []
    for gate, L, (h, hv), name, fmt in itertools.product(gates, cache_lengths, heads, dtypes, ring_formats):
        bound = lower_bound if gate == "kda" else None
        try:
            ring_format(fmt).check_gate(bound, L)
        except ValueError:
            continue
        if gate == "gdn" and fmt != "raw":
            continue
        p = Problem(batch, h, hv, dims[0], dims[1], L)
        fn = replay_fn.get(gate) if isinstance(replay_fn, dict) else replay_fn
        kw = {} if fn is None else {"replay_fn": fn}
        n = steps or 2 * L + 3
        r = run_sequence(p, steps=n, seed=seed + L, state_dtype=DTYPES[name], device=device, warm=True,
                         ring_format=fmt, lower_bound=bound, gate=gate, **kw)  # fmt: skip
        tol = tolerance(DTYPES[name], steps=n)
        rows.append({"impl": label, "gate": gate, "ring_format": fmt, "cache_length": L, "num_q_heads": h,
                     "num_v_heads": hv, "state_dtype": name, "steps": n, "rel_err_out": r.max_out_rel,
                     "rel_err_state": r.max_state_rel, "max_abs": r.max_abs, "tolerance": tol,
                     "finite": not r.nonfinite})  # fmt: skip
    return pd.DataFrame(rows)


GATE_NAMES = {"kda": "KDA", "gdn": "Gated DeltaNet"}


def plot_error_sweep(frame: pd.DataFrame, path=None):
    """Worst relative error per (row, head) (outputs and checkpoints) vs L, one line per (impl, ring
    format, dtype), worst over head counts, one row of panels per gate, with each dtype's tolerance at
    the longest sequence (dashed)."""
    frame = frame.assign(**{c: frame[c] if c in frame else d for c, d in (("ring_format", "raw"), ("gate", "kda"))})
    gates = [g for g in GATE_NAMES if g in set(frame.gate)]
    fig, axes = plt.subplots(len(gates), 2, figsize=(10, 3.6 * len(gates)), sharey=True, squeeze=False)
    for row, gate in zip(axes, gates, strict=True):
        fg = frame[frame.gate == gate]
        for ax, col, title in zip(row, ("rel_err_out", "rel_err_state"), ("outputs", "checkpoints"), strict=True):
            for (impl, fmt, sd), g in fg.groupby(["impl", "ring_format", "state_dtype"]):
                g = g.groupby("cache_length")[col].max()
                ax.plot(g.index, g.clip(lower=1e-17), "o-", label=f"{impl}, {fmt} rings, {sd}")
            for sd, g in fg.groupby("state_dtype"):
                ax.axhline(g.tolerance.max(), ls="--", lw=0.8, color="grey")
                ax.annotate(f"{sd} tolerance", (1, g.tolerance.max()), fontsize=7, color="grey", va="bottom")
            log2_x(ax, fg.cache_length)
            ax.set_yscale("log")
            ax.set_title(f"{GATE_NAMES[gate]}: {title}")
        row[0].set_ylabel("worst ‖x − ref‖/‖ref‖ per (row, head)")
        row[1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle("Error against the float64 standard recurrence")
    return finish(fig, path)


def drift_sweep(steps: int, cache_lengths=(1, 8, 64), *, dtype="float32", seed=0, p_force=0.0) -> pd.DataFrame:
    """Output error per step over a long horizon: standard decode vs ReplaySSM at several L, same inputs."""
    rows = []
    base = Problem(2, 1, 2, 16, 16, 1)
    std = run_sequence(base, steps=steps, seed=seed, standard=True, replay_fn=recurrent_decode_step,
                       state_dtype=DTYPES[dtype], p_force=0.0, p_pad=0.0)  # fmt: skip
    rows += [
        {"impl": "standard", "cache_length": 0, "step": i, "rel_err_out": e} for i, e in enumerate(std.step_out_rel)
    ]
    for L in cache_lengths:
        p = Problem(2, 1, 2, 16, 16, L)
        r = run_sequence(p, steps=steps, seed=seed, state_dtype=DTYPES[dtype], p_force=p_force, p_pad=0.0)
        rows += [
            {"impl": "replayssm", "cache_length": L, "step": i, "rel_err_out": e} for i, e in enumerate(r.step_out_rel)
        ]
    return pd.DataFrame(rows)


def plot_drift(frame: pd.DataFrame, window: int = 64, path=None):
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for (impl, L), g in frame.groupby(["impl", "cache_length"]):
        label = "standard decode" if impl == "standard" else f"ReplaySSM L={L}"
        smooth = g.sort_values("step").rel_err_out.rolling(window, min_periods=1).max()
        ax.plot(g.step, smooth, label=label, lw=1.2)
    ax.set_yscale("log")
    ax.set_xlabel("decode step")
    ax.set_ylabel(f"‖out − ref‖/‖ref‖ (rolling max, {window} steps)")
    ax.set_title("Long-horizon drift against the float64 recurrence (float32 state, same inputs)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return finish(fig, path)
