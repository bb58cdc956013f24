"""``python -m replayssm_kernels.tools.plots``: every figure and README table, drawn from the committed CSVs.

For each device folder ``results/<device>/`` it draws ``bench/speedup.png``, ``bench/bandwidth.png`` and
``bench/regime.png`` (KDA; with Gated DeltaNet rows also ``*_gdn.png``)
from ``bench/decode_throughput.csv`` and ``gpu_check/kernel_errors.png`` from
``gpu_check/kernel_errors.csv``, writes ``redesign/comparison.csv`` from the before/after timings
there, and rewrites the README's generated block (between
``<!-- results:begin -->`` and ``<!-- results:end -->``) with each device's headline tables. The GPU's
name comes from the ``env.json`` beside each CSV. Nothing here runs a kernel; every figure is a
function that returns it (a notebook shows it inline) and saves it where given a path.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from replayssm_ref.figures import RESULTS, finish, log2_x
from replayssm_ref.formats import RING_FORMATS
from replayssm_ref.traffic import TrafficShape, model_speedup

README = RESULTS.parent / "README.md"
DIM = 128  # the headline shape: K = V = 128, bf16 rings, and per gate (H, HV):
HEADLINE_HEADS = {"kda": (32, 32), "gdn": (16, 32)}  # Kimi Linear's; Qwen3-Next's
GATE_NAMES = {"kda": "KDA", "gdn": "Gated DeltaNet"}
STATE_DTYPES = ("float32", "bfloat16")
BASELINES = {"standard_helion": "our standard decode", "fla_fused_recurrent": "FLA fused_recurrent"}
PEERS = {"sglang_helion_replayssm": "sglang Helion", "sglang_triton_replayssm": "sglang Triton"}  # ReplaySSM peers
FORMATS = ("raw", "predecayed")  # replayssm_ref.formats
MARKERS = {"raw": "o", "predecayed": "^"}
SIZES = {"float32": 4, "bfloat16": 2}


def device_folders() -> list[Path]:
    """``results/<device>/`` folders holding a benchmark sweep, H100 first."""
    return sorted(p.parent.parent for p in RESULTS.glob("*/bench/decode_throughput.csv"))


def env_of(csv: Path) -> dict:
    env = csv.parent / "env.json"
    return json.loads(env.read_text()) if env.exists() else {}


def gpu_name(csv: Path) -> str:
    """The GPU named in the env.json beside ``csv`` (the folder name if there is none)."""
    return env_of(csv).get("gpu") or csv.parent.parent.name


def load_bench(csv: Path) -> pd.DataFrame:
    """A sweep's rows; sweeps from before ring formats get ``ring_format`` raw on their ReplaySSM rows,
    and sweeps from before Gated DeltaNet ``gate`` kda."""
    df = pd.read_csv(csv, keep_default_na=False)
    if "precision" in df:  # sweeps before the redesign also timed a "precise" mode, now gone
        df = df[df.precision.isin(["fast", ""])]
    fmt = df.ring_format if "ring_format" in df else pd.Series("", index=df.index)
    gate = [g or "kda" for g in df.gate] if "gate" in df else "kda"
    df = df.assign(
        ring_format=[f or ("raw" if c != "" else "") for f, c in zip(fmt, df.cache_dtype, strict=True)], gate=gate
    )
    # rows of a ring format deleted since (bf16_gate: docs/lab_notes.md) stay in the CSV, not in the figures
    return as_default_design(df[df.ring_format.isin(["", *RING_FORMATS])])


KEY = ["gate", "batch", "num_q_heads", "num_v_heads", "key_dim", "value_dim", "cache_length", "state_dtype",
       "cache_dtype", "ring_format"]  # fmt: skip


def as_default_design(df: pd.DataFrame) -> pd.DataFrame:
    """``replayssm_helion`` (ours, ``launches=None``) as the design the device's table picks now: where
    its one-launch rule covers a point (``plan.default_launches``), the sweep's one-launch row
    (``replayssm_helion_fused``) is ours and the row the sweep timed as the default then becomes
    ``replayssm_helion_multi`` (two or three launches). Column ``timed_as`` keeps the sweep's name."""
    from ..configs import stem_of
    from ..plan import default_launches

    df = df.assign(timed_as=df.impl)
    if "replayssm_helion_fused" not in set(df.impl):
        return df
    stem = stem_of(df.device.iloc[0])
    one = [
        i == "replayssm_helion_fused" and default_launches(L, stem, gate=g, predecayed=f == "predecayed", batch=B) == 1
        for i, L, g, f, B in zip(df.impl, df.cache_length, df.gate, df.ring_format, df.batch, strict=True)
    ]
    covered = set(map(tuple, df.loc[one, KEY].to_numpy().tolist()))
    old = [
        i == "replayssm_helion" and tuple(r) in covered
        for i, r in zip(df.impl, df[KEY].to_numpy().tolist(), strict=True)
    ]
    impl = np.where(one, "replayssm_helion", np.where(old, "replayssm_helion_multi", df.impl))
    return df.assign(impl=impl)


def gates_of(df: pd.DataFrame) -> list[str]:
    """The gates a sweep has rows of, KDA first."""
    return [g for g in GATE_NAMES if g in set(df.gate)]


def _shape_label(gate: str) -> str:
    h, hv = HEADLINE_HEADS[gate]
    heads = f"H=HV={hv}" if h == hv else f"H={h}, HV={hv}"
    return f"{GATE_NAMES[gate]}, {heads}, K=V={DIM}"


def _headline_shape(df: pd.DataFrame, gate: str = "kda") -> pd.DataFrame:
    h, hv = HEADLINE_HEADS[gate]
    keep = (df.gate == gate) & (df.num_v_heads == hv) & (df.num_q_heads == h)
    keep &= (df.key_dim == DIM) & (df.value_dim == DIM)
    return df[keep & df.cache_dtype.isin(["bfloat16", ""])]


def _model(gate: str, state_dtype: str, fmt: str, L: int) -> float:
    h, hv = HEADLINE_HEADS[gate]
    return model_speedup(TrafficShape(h, hv, DIM, DIM, SIZES[state_dtype], ring_format=fmt, gate=gate), L)


def speedups(df: pd.DataFrame, gate: str = "kda") -> pd.DataFrame:
    """ReplaySSM rows (every ring format) at the gate's headline shape with ``x_<baseline>`` columns
    (baseline time / ours), each baseline timed at the same batch and state dtype, and the bytes model's
    limit ``x_model`` for the row's format."""
    df = _headline_shape(df, gate)
    rep = df[df.impl == "replayssm_helion"].copy()
    for base in BASELINES:
        b = df[df.impl == base][["batch", "state_dtype", "us_per_step"]].rename(columns={"us_per_step": base})
        rep = rep.merge(b, on=["batch", "state_dtype"], how="left")
        rep[f"x_{base}"] = rep[base] / rep.us_per_step
    rep["x_model"] = [
        _model(gate, sd, f or "raw", L)
        for sd, L, f in zip(rep.state_dtype, rep.cache_length, rep.ring_format, strict=True)
    ]
    return rep


def best_format(sp: pd.DataFrame) -> pd.DataFrame:
    """The fastest ring format at each (batch, state dtype, L)."""
    return sp.loc[sp.groupby(["batch", "state_dtype", "cache_length"]).us_per_step.idxmin()]


def plot_speedup(df: pd.DataFrame, gpu: str, path=None, gate: str = "kda"):
    """ReplaySSM's speedup over our standard decode vs ring length, one line per batch (the fastest ring
    format at each point, by marker), one panel per state dtype, the bytes model's limit of the leanest
    format dashed."""
    sp = best_format(speedups(df, gate))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, sd in zip(axes, STATE_DTYPES, strict=True):
        g = sp[sp.state_dtype == sd]
        for i, (batch, gb) in enumerate(g.groupby("batch")):
            gb = gb.sort_values("cache_length")
            ax.plot(gb.cache_length, gb.x_standard_helion, "-", color=f"C{i}", label=f"batch {batch}")
            for fmt, gf in gb.groupby("ring_format"):
                ax.scatter(gf.cache_length, gf.x_standard_helion, marker=MARKERS.get(fmt, "o"), color=f"C{i}", s=22)
        lengths = sorted(set(g.cache_length))
        formats = FORMATS if gate == "kda" else ("raw",)
        model = [max(_model(gate, sd, f, L) for f in formats if f != "predecayed" or L <= 17) for L in lengths]
        ax.plot(lengths, model, "k--", lw=1, label="bytes model")
        ax.axhline(1.0, color="grey", lw=0.8)
        log2_x(ax, g.cache_length)
        ax.set_title(f"{sd} state, bf16 rings")
    for fmt, m in MARKERS.items():
        axes[1].scatter([], [], marker=m, color="grey", label=f"{fmt} rings")
    axes[0].set_ylabel("× our standard decode (higher is faster)")
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle(f"ReplaySSM speedup over standard decode, {_shape_label(gate)} ({gpu})")
    return finish(fig, path)


def plot_bandwidth(df: pd.DataFrame, gpu: str, path=None, gate: str = "kda"):
    """Model bytes per second (each ring format's own model) as a share of the measured copy ceiling at
    the largest batch: one line per ring format by ring length, the baselines as horizontal lines; one
    panel per state dtype."""
    df = _headline_shape(df, gate)
    df = df[df.batch == df.batch.max()]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, sd in zip(axes, STATE_DTYPES, strict=True):
        rep = df[(df.state_dtype == sd) & (df.impl == "replayssm_helion")]
        for fmt, g in rep.groupby("ring_format"):
            g = g.sort_values("cache_length")
            ax.plot(g.cache_length, 100 * g.frac_of_copy, marker=MARKERS.get(fmt, "o"), label=f"ReplaySSM, {fmt}")
        for i, (base, label) in enumerate(BASELINES.items()):
            b = df[(df.state_dtype == sd) & (df.impl == base)]
            if len(b):
                ax.axhline(100 * b.frac_of_copy.iloc[0], ls="--", lw=1, label=label, color=f"C{5 + i}")
        log2_x(ax, rep.cache_length)
        ax.set_ylim(0, 105)
        ax.set_title(f"{sd} state, bf16 rings")
    axes[0].set_ylabel("% of the copy ceiling (bytes model)")
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle(f"Bandwidth at batch {df.batch.max()}, {_shape_label(gate)} ({gpu})")
    return finish(fig, path)


def plot_regime(df: pd.DataFrame, gpu: str, path=None, gate: str = "kda"):
    """Where ReplaySSM wins: its speedup over our standard decode (fastest ring format) by batch and
    ring length, one panel per state dtype; green where it is faster."""
    sp = best_format(speedups(df, gate))
    sp = sp[sp.cache_length >= 2]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for ax, sd in zip(axes, STATE_DTYPES, strict=True):
        grid = sp[sp.state_dtype == sd].pivot_table(index="batch", columns="cache_length", values="x_standard_helion")
        if grid.empty:
            ax.set_visible(False)
            continue
        im = ax.imshow(grid.values, cmap="RdYlGn", vmin=0.5, vmax=1.5, aspect="auto", origin="lower")
        ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
        ax.set_yticks(range(len(grid.index)), [str(b) for b in grid.index])
        for (y, x), v in np.ndenumerate(grid.values):
            if np.isfinite(v):
                ax.text(x, y, f"{v:.2f}", ha="center", va="center", fontsize=8)
        ax.set_xlabel("ring length L")
        ax.set_ylabel("batch")
        ax.set_title(f"{sd} state, bf16 rings")
        fig.colorbar(im, ax=ax, label="× our standard decode")
    fig.suptitle(f"Where ReplaySSM wins, {_shape_label(gate)} ({gpu})")
    return finish(fig, path)


def load_errors(csv: Path) -> pd.DataFrame:
    """A GPU check's rows. Checks from before Gated DeltaNet named the decay (softplus or bounded)
    ``gate``: it becomes ``decay``, and ``gate`` kda; checks from before ring formats get raw."""
    err = pd.read_csv(csv, keep_default_na=False)
    if "decay" not in err:
        err = err.assign(decay=err.get("gate", "softplus"), gate="kda")
    if "ring_format" not in err:
        err = err.assign(ring_format=["raw" if i == "replayssm_helion" else "" for i in err.impl])
    return err


def plot_kernel_errors(err: pd.DataFrame, gpu: str, path=None):
    """Worst relative error (outputs and checkpoints) of the GPU check vs ring length, one line per gate
    and ring format, one panel per state/ring dtype pair, with the tolerance dashed."""
    rep = err[err.impl == "replayssm_helion"]
    if "ring_format" not in rep:
        rep = rep.assign(ring_format="raw")
    if "decay" not in rep:  # a frame read without load_errors
        rep = rep.assign(gate="kda")
    pairs = sorted(rep.groupby(["state_dtype", "cache_dtype"]).groups)
    fig, axes = plt.subplots(1, len(pairs), figsize=(4 * len(pairs), 3.6), sharey=True, squeeze=False)
    for ax, (sd, cd) in zip(axes[0], pairs, strict=True):
        g = rep[(rep.state_dtype == sd) & (rep.cache_dtype == cd)]
        for (gate, fmt), gf in g.groupby(["gate", "ring_format"]):
            worst = gf.groupby("cache_length")[["max_out_rel", "max_state_rel", "tolerance"]].max().reset_index()
            worst["rel"] = worst[["max_out_rel", "max_state_rel"]].max(axis=1)
            style = "-" if gate == "kda" else ":"
            ax.plot(
                worst.cache_length, worst.rel, style, marker=MARKERS.get(fmt, "o"), label=f"{GATE_NAMES[gate]}, {fmt}"
            )
        tol = g.groupby("cache_length").tolerance.max()
        ax.plot(tol.index, tol.values, "k--", lw=0.8, label="tolerance")
        log2_x(ax, g.cache_length)
        ax.set_yscale("log")
        ax.set_title(f"{sd} state, {cd} rings", fontsize=9)
    axes[0][0].set_ylabel("worst ‖x − ref‖/‖ref‖")
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle(f"Kernel error vs float64 per ring format, bf16 inputs and outputs ({gpu})", fontsize=10)
    return finish(fig, path)


def _peer_best(df: pd.DataFrame, impl: str, batch: int, sd: str):
    g = df[(df.impl == impl) & (df.batch == batch) & (df.state_dtype == sd) & (df.cache_length >= 2)]
    return None if g.empty else g.loc[g.us_per_step.idxmin()]


def _num(x: float, digits: int) -> str:
    """A table cell: the number, or a dash where the baseline was not timed."""
    return "–" if not np.isfinite(x) else f"{x:.{digits}f}"


def headline_markdown(df: pd.DataFrame, gate: str = "kda") -> str:
    """Per state dtype at the largest batch: the best ring length and format (L >= 2; at L = 1 the
    default design is the standard kernel), its time and ratios, and each peer at its own best L."""
    sp = speedups(df, gate)
    batch = sp.batch.max()
    sp = sp[(sp.batch == batch) & (sp.cache_length >= 2)]
    head = _headline_shape(df, gate)
    lines = [
        "| state | best L, rings | ReplaySSM (µs) | standard (µs) | FLA (µs) | × standard | × FLA | "
        + " | ".join(f"{label} (µs, L)" for label in PEERS.values())
        + " | % of copy | model limit |",
        "|---|---|---|---|---|---|---|" + "---|" * len(PEERS) + "---|---|",
    ]
    for sd in STATE_DTYPES:
        g = sp[sp.state_dtype == sd]
        if not len(g):
            continue
        r = g.loc[g.us_per_step.idxmin()]
        peers = []
        for impl in PEERS:
            p = _peer_best(head, impl, batch, sd)
            peers.append("–" if p is None else f"{p.us_per_step:.1f} (L={p.cache_length})")
        lines.append(
            f"| {sd} | L={r.cache_length}, {r.ring_format} | {r.us_per_step:.1f} | {_num(r.standard_helion, 1)} | "
            f"{_num(r.fla_fused_recurrent, 1)} | {_num(r.x_standard_helion, 2)} | {_num(r.x_fla_fused_recurrent, 2)} | "
            + " | ".join(peers)
            + f" | {100 * r.frac_of_copy:.0f}% | {r.x_model:.2f} |"
        )
    return "\n".join(lines)


def batches_markdown(df: pd.DataFrame, gate: str = "kda") -> str:
    """× our standard decode at the best ring length (L >= 2) and format per batch and state dtype."""
    sp = speedups(df, gate)
    sp = sp[sp.cache_length >= 2]
    lines = ["| batch | " + " | ".join(f"{sd} state: best L, rings, ×" for sd in STATE_DTYPES) + " |", "|---|---|---|"]
    for batch, g in sp.groupby("batch"):
        cells = []
        for sd in STATE_DTYPES:
            s = g[g.state_dtype == sd]
            r = s.loc[s.us_per_step.idxmin()] if len(s) else None
            cells.append("–" if r is None else f"L={r.cache_length}, {r.ring_format}, {r.x_standard_helion:.2f}×")
        lines.append(f"| {batch} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def load_spec(csv: Path) -> pd.DataFrame:
    return pd.read_csv(csv, keep_default_na=False)


def spec_speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Per (batch, T, draft shape, state dtype): our round and the snapshot round, and their ratio."""
    keys = ["batch", "num_drafts", "tree", "state_dtype"]
    ours = df[df.impl == "replayssm_spec"].set_index(keys).us_per_round.rename("replayssm_us")
    snap = df[df.impl == "snapshot_spec"].set_index(keys).us_per_round.rename("snapshot_us")
    table = pd.concat([ours, snap], axis=1).dropna().reset_index()
    table["x_snapshot"] = table.snapshot_us / table.replayssm_us
    return table


def plot_spec_speedup(df: pd.DataFrame, gpu: str, path=None):
    """Verify + commit per round: the snapshot baseline's time over ours, by batch, one line per
    (T, draft shape), one panel per state dtype."""
    sp = spec_speedups(df)
    dtypes = [d for d in STATE_DTYPES if d in set(sp.state_dtype)]
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5 * len(dtypes), 3.6), sharey=True, squeeze=False)
    for ax, sd in zip(axes[0], dtypes, strict=True):
        g = sp[sp.state_dtype == sd]
        for i, ((T, tree), gt) in enumerate(g.groupby(["num_drafts", "tree"])):
            gt = gt.sort_values("batch")
            ax.plot(gt.batch, gt.x_snapshot, "o-" if not tree else "s--", color=f"C{i}",
                    label=f"T={T}, {'tree' if tree else 'chain'}")  # fmt: skip
        ax.axhline(1.0, color="grey", lw=0.8)
        log2_x(ax, g.batch, label="batch")
        ax.set_title(f"{sd} state, bf16 rings", fontsize=10)
    axes[0][0].set_ylabel("× our snapshot verify + commit")
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle(f"Speculative decoding per round, ReplaySSM vs snapshots, HV=32, K=V=128 ({gpu})", fontsize=10)
    return finish(fig, path)


def spec_markdown(df: pd.DataFrame, headline: bool = False) -> str:
    """Per (batch, T, drafts, state dtype): µs per round and the ratio; ``headline``: the README's rows
    (T = 4, batches 256 and 64)."""
    sp = spec_speedups(df)
    if headline:
        sp = sp[(sp.num_drafts == 4) & sp.batch.isin([256, 64])]
    lines = ["| batch | T | drafts | state | ReplaySSM (µs/round) | snapshots (µs/round) | × snapshots |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    order = sp.sort_values(["state_dtype", "num_drafts", "tree", "batch"], ascending=[False, True, True, False])
    for r in order.itertuples():
        lines.append(f"| {r.batch} | {r.num_drafts} | {'tree' if r.tree else 'chain'} | {r.state_dtype} | "
                     f"{r.replayssm_us:.1f} | {r.snapshot_us:.1f} | {r.x_snapshot:.2f} |")  # fmt: skip
    return "\n".join(lines)


def results_markdown(folders: list[Path]) -> str:
    """The README's block: the newest sweep's headline tables (each gate, and the speculative rounds),
    and a line per other device; every device's tables are in its ``bench/summary.md``."""
    dated = sorted(folders, key=lambda f: env_of(f / "bench" / "decode_throughput.csv").get("utc_time", ""))
    parts = []
    for folder in reversed(dated):
        csv = folder / "bench" / "decode_throughput.csv"
        df = load_bench(csv)
        env = env_of(csv)
        rel = folder.relative_to(RESULTS.parent)
        sha = (env.get("git_sha") or "unknown")[:7]
        when = env.get("utc_time", "?")[:10]
        if parts:  # an older sweep: a line
            parts += [f"{gpu_name(csv)}: sweep of revision {sha} ({when}), [tables]({rel}/bench/summary.md).", ""]
            continue
        copy = df.copy_gbps.iloc[0] / 1e3
        parts += [
            f"### {gpu_name(csv)}",
            "",
            f"Sweep of `{rel}/bench/` (revision {sha}, {when}; copy ceiling {copy:.2f} TB/s in the same run); "
            f"bf16 rings, the default design; [per batch]({rel}/bench/summary.md).",
            "",
        ]
        for gate in gates_of(df):
            parts += [
                f"{_shape_label(gate)}, batch {df[df.gate == gate].batch.max()}:",
                "",
                headline_markdown(df, gate),
                "",
            ]
        spec = folder / "spec" / "spec_rounds.csv"
        if spec.exists():
            parts += [
                f"Speculative decoding per round, verify + commit ([every case]({rel}/spec/summary.md)):",
                "",
                spec_markdown(load_spec(spec), headline=True),
                "",
            ]
    return "\n".join(parts)


def designs_markdown(df: pd.DataFrame) -> str:
    """One launch against two or three at every point the sweep timed both (by the sweep's own names,
    ``timed_as``: the default then was two or three launches); empty if it timed no one-launch row."""
    one = df[df.timed_as == "replayssm_helion_fused"][[*KEY, "us_per_step"]]
    multi = df[df.timed_as == "replayssm_helion"][[*KEY, "us_per_step"]]
    both = one.merge(multi, on=KEY, suffixes=("_one", "_multi"))
    if both.empty:
        return ""
    lines = ["| gate | batch | state | L | rings | two or three launches (µs) | one launch (µs) | one / multi |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in both.sort_values(["gate", "batch", "state_dtype", "cache_length"]).itertuples():
        lines.append(
            f"| {r.gate} | {r.batch} | {r.state_dtype} | {r.cache_length} | {r.ring_format} | "
            f"{r.us_per_step_multi:.1f} | {r.us_per_step_one:.1f} | {r.us_per_step_one / r.us_per_step_multi:.2f} |"
        )
    return "\n".join(lines)


def summary_markdown(df: pd.DataFrame, gpu: str) -> str:
    """``bench/summary.md``: per gate, the best ring length and format per batch, and the figures."""
    parts = [f"# {gpu}: ReplaySSM over our standard decode", "",
             "Generated by `python -m replayssm_kernels.tools.plots` from `decode_throughput.csv`.", ""]  # fmt: skip
    for gate in gates_of(df):
        suffix = "" if gate == "kda" else f"_{gate}"
        parts += [f"## {_shape_label(gate)}", "", f"Batch {df[df.gate == gate].batch.max()}:", "",
                  headline_markdown(df, gate), "", "Best ring length per batch:", "", batches_markdown(df, gate), "",
                  f"![speedup](speedup{suffix}.png) ![regime](regime{suffix}.png)", ""]  # fmt: skip
    designs = designs_markdown(df)
    if designs:
        parts += ["## One launch against two or three (`launches=1`; the table picks per point)", "", designs, ""]
    return "\n".join(parts)


def redesign_comparison(folder: Path) -> pd.DataFrame | None:
    """The redesign's before/after timing (``redesign/before`` and ``redesign/after``, each the bench run
    twice in one device call, interleaved): median per case and implementation, and after / before."""
    before, after = (folder / "redesign" / w / "decode_throughput.csv" for w in ("before", "after"))
    if not (before.exists() and after.exists()):
        return None
    keys = ["impl", "batch", "num_v_heads", "cache_length", "state_dtype", "cache_dtype"]
    b = load_bench(before).groupby(keys).us_per_step.median().rename("us_before")
    a = load_bench(after).groupby(keys).us_per_step.median().rename("us_after")
    table = pd.concat([b, a], axis=1).reset_index()
    table["after_over_before"] = table.us_after / table.us_before
    return table


def replace_block(text: str, body: str) -> str:
    begin, end = "<!-- results:begin -->", "<!-- results:end -->"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m replayssm_kernels.tools.plots", description=__doc__.splitlines()[0])
    ap.add_argument("--no-readme", action="store_true", help="draw the figures only; leave README.md as it is")
    args = ap.parse_args(argv)
    folders = device_folders()
    for folder in folders:
        csv = folder / "bench" / "decode_throughput.csv"
        df, gpu = load_bench(csv), gpu_name(csv)
        for gate in gates_of(df):
            suffix = "" if gate == "kda" else f"_{gate}"
            for name, plot in (("speedup", plot_speedup), ("bandwidth", plot_bandwidth), ("regime", plot_regime)):
                plt.close(plot(df, gpu, folder / "bench" / f"{name}{suffix}.png", gate=gate))
        (folder / "bench" / "summary.md").write_text(summary_markdown(df, gpu) + "\n")
        spec = folder / "spec" / "spec_rounds.csv"
        if spec.exists():
            plt.close(plot_spec_speedup(load_spec(spec), gpu_name(spec), folder / "spec" / "speedup.png"))
            text = f"# {gpu_name(spec)}: speculative decoding per round\n\nGenerated by "
            text += "`python -m replayssm_kernels.tools.plots` from `spec_rounds.csv`.\n\n"
            text += spec_markdown(load_spec(spec)) + "\n\n![speedup](speedup.png)\n"
            (folder / "spec" / "summary.md").write_text(text)
        comparison = redesign_comparison(folder)
        if comparison is not None:
            comparison.to_csv(folder / "redesign" / "comparison.csv", index=False)
        errors = folder / "gpu_check" / "kernel_errors.csv"
        if errors.exists():
            err = load_errors(errors)
            plt.close(plot_kernel_errors(err, gpu_name(errors), folder / "gpu_check" / "kernel_errors.png"))
        print(f"drew {folder.relative_to(RESULTS.parent)}")
    if not args.no_readme:
        README.write_text(replace_block(README.read_text(), results_markdown(folders)))
        print(f"rewrote the results block of {README.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
