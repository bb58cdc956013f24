"""Figures and tables drawn from the committed CSVs (one function per figure), and the README tables.

``python -m replayssm_kernels.plots`` redraws every benchmark PNG under ``results/`` and rewrites the
generated blocks of ``README.md`` from ``results/bench/decode_throughput.csv``,
``results/gpu_check/kernel_errors.csv`` and ``results/profile/launch_times.csv`` (the H200), and from
the same files under ``h100/`` (the H100's sweep, README blocks named ``..._H100``). Nothing here runs
a kernel.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from replayssm_ref.figures import _finish, _log2_x  # noqa: E402  (one style for every figure)

from .configs import SPLIT_FLUSH_FROM_L  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BENCH_CSV = ROOT / "results/bench/decode_throughput.csv"
ERRORS_CSV = ROOT / "results/gpu_check/kernel_errors.csv"
LAUNCHES_CSV = ROOT / "results/profile/launch_times.csv"
# Other GPUs' result sets: (README block suffix, sweep, gpu_check errors, per-launch profile)
OTHER_SETS = [
    ("H100", BENCH_CSV.parent / "h100" / BENCH_CSV.name, ERRORS_CSV.parent / "h100" / ERRORS_CSV.name,
     LAUNCHES_CSV.parent / "h100" / LAUNCHES_CSV.name),
]  # fmt: skip


def revision(csv: Path) -> str:
    """The short git SHA in the env.json beside ``csv`` (the revision that produced it)."""
    import json

    env = csv.parent / "env.json"
    return json.loads(env.read_text()).get("git_sha", "unknown")[:7] if env.exists() else "unknown"


def _last_run(csv: Path) -> dict:
    """The config of the last benchmark run recorded in the env.json beside ``csv`` ({} if none)."""
    import json

    env = csv.parent / "env.json"
    runs = json.loads(env.read_text()).get("config", {}).get("runs", [{}]) if env.exists() else [{}]
    return runs[-1]


def split_from(csv: Path) -> int:
    """The ring length from which the default design ran three launches in the benchmark run behind
    ``csv`` (its env.json's last run; runs before run 30 recorded none and used ``SPLIT_FLUSH_FROM_L``)."""
    return int(_last_run(csv).get("split_flush_from_l", SPLIT_FLUSH_FROM_L))


def standard_at_l1(csv: Path) -> bool:
    """Whether the default design ran the standard kernel at L = 1 in the run behind ``csv`` (runs
    that recorded no ``default_launches`` predate that choice)."""
    return _last_run(csv).get("default_launches", {}).get("1") == 0


BASELINES = ("standard_helion", "fla_fused_recurrent")


def load_bench(path: Path = BENCH_CSV) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False)


def _shape_key(df: pd.DataFrame) -> list[str]:
    return ["batch", "num_q_heads", "num_v_heads", "key_dim", "value_dim", "state_dtype"]


def speedups(df: pd.DataFrame, impl: str = "replayssm_helion") -> pd.DataFrame:
    """One row per ReplaySSM measurement of ``impl``, with the baselines of the same shape beside it."""
    rep = df[df.impl == impl].copy()
    for base in BASELINES:
        b = df[df.impl == base][_shape_key(df) + ["us_per_step"]].rename(columns={"us_per_step": f"us_{base}"})
        rep = rep.merge(b, on=_shape_key(df), how="left")
        rep[f"speedup_vs_{base}"] = rep[f"us_{base}"] / rep["us_per_step"]
    return rep


def best_cache_length(df: pd.DataFrame) -> pd.DataFrame:
    """Per configuration, the L with the lowest time per step and its speedups."""
    sp = speedups(df)
    idx = sp.groupby(_shape_key(df) + ["cache_dtype"])["us_per_step"].idxmin()
    cols = _shape_key(df) + ["cache_dtype", "cache_length", "us_per_step"]
    cols += [f"speedup_vs_{b}" for b in BASELINES] + ["frac_of_copy"]
    return sp.loc[idx, cols].sort_values(_shape_key(df)).reset_index(drop=True)


HEADS = 32  # the head count of the per-batch panels (H = HV, K = V = 128), as in the headline table


def _by_batch(df: pd.DataFrame, num_v_heads: int = HEADS) -> pd.DataFrame:
    """The rows of the per-batch panels: one head configuration, so each line is one shape over L."""
    return df[(df.num_v_heads == num_v_heads) & (df.num_q_heads == num_v_heads) & (df.key_dim == 128)]


def _by_heads(df: pd.DataFrame, batch: int = 256) -> pd.DataFrame:
    """The rows of the head-count panel: the largest batch, K = V = 128, fp32 state with bf16 rings."""
    return df[
        (df.batch == batch) & (df.key_dim == 128) & (df.state_dtype == "float32") & (df.cache_dtype == "bfloat16")
    ]


def _panels(df, heads_panel: bool):
    """One panel per batch size, plus (if the sweep has more than one head count) one per head count."""
    batches = sorted(_by_batch(df).batch.unique())
    heads = heads_panel and _by_heads(df).num_v_heads.nunique() > 1
    n = len(batches) + heads
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.6), squeeze=False)
    return fig, dict(zip(batches, axes[0], strict=False)), (axes[0][-1] if heads else None)


def _gqa_label(g: pd.DataFrame) -> str:
    h, hv = int(g.num_q_heads.iloc[0]), int(g.num_v_heads.iloc[0])
    return f"HV={hv}" + (f", H={h}" if h != hv else "")


def _baseline_us(df: pd.DataFrame, base: str, like: pd.DataFrame):
    """The baseline's time at the shape of ``like``'s rows (no ring), or None if it was not timed."""
    b = df[df.impl == base].merge(like[_shape_key(df)].drop_duplicates())
    return b.us_per_step.iloc[0] if len(b) else None


def plot_time_vs_cache_length(df: pd.DataFrame, path: Path | None = None):
    """Time per step vs L: one panel per batch size (H = HV = 32), one per head count at B = 256;
    the baselines as horizontal lines in the color of the ReplaySSM line they compare with."""
    fig, axes, heads_ax = _panels(df, heads_panel=True)
    rep = df[df.impl == "replayssm_helion"]
    fused = df[df.impl == "replayssm_helion_fused"]
    per_batch, per_heads = _by_batch(rep), _by_heads(rep)
    panels = [(ax, per_batch[per_batch.batch == b], ["state_dtype", "cache_dtype"]) for b, ax in axes.items()]
    if heads_ax is not None:
        panels.append((heads_ax, per_heads[per_heads.num_q_heads == per_heads.num_v_heads], ["num_v_heads"]))
    for ax, sel, keys in panels:
        for _, g in sel.groupby(keys):
            g = g.sort_values("cache_length")
            label = f"{g.state_dtype.iloc[0]} state, {g.cache_dtype.iloc[0]} ring, {_gqa_label(g)}"
            line = ax.plot(g.cache_length, g.us_per_step, "o-", label=label)
            color = line[0].get_color()
            f = fused.merge(g[_shape_key(df) + ["cache_dtype", "cache_length"]]).sort_values("cache_length")
            if len(f):  # the one-launch design, same color, open markers
                ax.plot(f.cache_length, f.us_per_step, "o--", mfc="none", color=color, lw=0.8)
            for base, style in zip(BASELINES, ("--", ":"), strict=True):
                us = _baseline_us(df, base, g)
                if us is not None:
                    ax.axhline(us, ls=style, color=color, lw=1)
        _log2_x(ax, rep.cache_length.unique())
        ax.set_ylabel("µs per decode step")
        ax.legend(fontsize=6)
    for batch, ax in axes.items():
        ax.set_title(f"batch {batch}, H=HV={HEADS}")
    if heads_ax is not None:
        heads_ax.set_title("batch 256, each head count (H=HV)")
    fig.suptitle("Decode time per step, ReplaySSM (solid) vs standard_helion (dashed) and FLA (dotted); "
                 "K=V=128; H200, CUDA graphs, median")  # fmt: skip
    return _finish(fig, path)


def plot_speedup(df: pd.DataFrame, path: Path | None = None):
    """ReplaySSM speedup over both standard-decode baselines vs L (above 1 = ReplaySSM faster): one panel
    per batch size (H = HV = 32), one per head count and GQA ratio at B = 256 (vs our standard decode)."""
    fig, axes, heads_ax = _panels(df, heads_panel=True)
    sp = speedups(df)
    sel = _by_batch(sp)
    for batch, ax in axes.items():
        for (sd, cd), g in sel[sel.batch == batch].groupby(["state_dtype", "cache_dtype"]):
            g = g.sort_values("cache_length")
            ax.plot(g.cache_length, g.speedup_vs_standard_helion, "o-", label=f"vs standard_helion ({sd}/{cd})")
            ax.plot(g.cache_length, g.speedup_vs_fla_fused_recurrent, "s--", label=f"vs FLA ({sd}/{cd})")
        ax.set_title(f"batch {batch}, H=HV={HEADS}")
    if heads_ax is not None:
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, (_, by_hv) in enumerate(_by_heads(sp).groupby("num_v_heads")):
            for _, g in by_hv.groupby("num_q_heads"):  # GQA 1 solid, GQA 2 dotted, one color per HV
                g = g.sort_values("cache_length")
                style = "o-" if (g.num_q_heads == g.num_v_heads).all() else "s:"
                heads_ax.plot(g.cache_length, g.speedup_vs_standard_helion, style, color=colors[i], label=_gqa_label(g))
        heads_ax.set_title("batch 256, fp32/bf16, vs standard_helion")
    for ax in [*axes.values(), *([heads_ax] if heads_ax is not None else [])]:
        ax.axhline(1.0, color="k", lw=0.8)
        _log2_x(ax, sp.cache_length.unique())
        ax.set_ylabel("speedup (baseline time / ReplaySSM time)")
        ax.legend(fontsize=6)
    fig.suptitle("ReplaySSM speedup over standard decode (K=V=128)")
    return _finish(fig, path)


def plot_bandwidth(df: pd.DataFrame, path: Path | None = None):
    """Effective bandwidth (model bytes / measured time) against the measured copy ceiling, per batch size
    at H = HV = 32, K = V = 128."""
    fig, axes, _ = _panels(df, heads_panel=False)
    sel = _by_batch(df)
    for batch, ax in axes.items():
        d = sel[sel.batch == batch]
        rep = d[d.impl == "replayssm_helion"]
        for (sd, cd), g in rep.groupby(["state_dtype", "cache_dtype"]):
            g = g.sort_values("cache_length")
            ax.plot(g.cache_length, g.gbps_effective, "o-", label=f"ReplaySSM {sd}/{cd}")
        lengths = sorted(rep.cache_length.unique())
        for base, marker in zip(BASELINES, ("^", "v"), strict=True):
            for sd, g in d[d.impl == base].groupby("state_dtype"):
                ax.plot(lengths, [g.gbps_effective.iloc[0]] * len(lengths), marker, ls="none", label=f"{base} {sd}")
        ax.axhline(d.copy_gbps.iloc[0], color="k", ls="--", lw=1, label="1 GiB copy ceiling")
        _log2_x(ax, lengths)
        ax.set_ylabel("GB/s by the bytes model")
        ax.set_ylim(0, d.copy_gbps.iloc[0] * 1.1)
        ax.set_title(f"batch {batch}, H=HV={HEADS}")
    axes[max(axes)].legend(fontsize=7)  # the largest batch has every dtype pair
    fig.suptitle("Achieved bandwidth by the traffic model (section 6) vs the copy ceiling, K=V=128")
    return _finish(fig, path)


def plot_kernel_errors(err: pd.DataFrame, path: Path | None = None):
    """Kernel error vs L against the float64 reference, per HV, dtype pair and precision mode."""
    rep = err[err.impl == "replayssm_helion"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, col, title in zip(
        axes, ("max_out_rel", "max_state_rel"), ("outputs", "checkpoints after flush"), strict=True
    ):
        for (hv, sd, cd, prec), g in rep.groupby(["num_v_heads", "state_dtype", "cache_dtype", "precision"]):
            g = g.groupby("cache_length")[col].max()
            ax.plot(g.index, g.values, "o-", label=f"HV={hv} {sd}/{cd} {prec}")
        _log2_x(ax, rep.cache_length.unique())
        ax.set_yscale("log")
        ax.set_ylabel("max ‖x − ref‖/‖ref‖ over steps")
        ax.set_title(title)
    axes[0].legend(fontsize=6)
    fig.suptitle("Helion ReplaySSM vs float64 reference on the H200 (bf16 inputs/outputs)")
    return _finish(fig, path)


# ---- README tables ---------------------------------------------------------------------------------


# ReplaySSM designs other than the default, as named in tables (bench impl -> label)
OTHER_DESIGNS = {
    "replayssm_helion_two_launch": "two launches",
    "replayssm_helion_split": "three launches",
    "replayssm_helion_fused": "fused",
}


def _headline_rows(df: pd.DataFrame, batch: int, num_v_heads: int) -> pd.DataFrame:
    """The headline shape: the given batch and HV, GQA 1, K = V = 128."""
    sel = _by_batch(df, num_v_heads)
    return sel[sel.batch == batch]


def headline_markdown(
    df: pd.DataFrame,
    batch: int = 256,
    num_v_heads: int = 32,
    rev: str = "unknown",
    split: int = SPLIT_FLUSH_FROM_L,
    standard_l1: bool = False,
) -> str:
    sel = _headline_rows(df, batch, num_v_heads)
    sp = speedups(sel)
    others = [i for i in OTHER_DESIGNS if (sel.impl == i).any()]  # designs timed beside the default, if any
    lines = [
        f"B={batch}, H=HV={num_v_heads}, K=V=128, {sel.device.iloc[0]}, revision {rev}; copy ceiling "
        f"{sel.copy_gbps.iloc[0]:.0f} GB/s (1 GiB device copy, same run).",
        "",
        "ReplaySSM is the default design (`launches=None`: "
        + ("the standard kernel on the checkpoint at L=1, where every step flushes; " if standard_l1 else "")
        + f"two launches below L={split}, three from L={split} on)"
        + (f"; {', '.join(OTHER_DESIGNS[i] for i in others)} timed in the same run." if others else "."),
        "",
        "| state / ring | L | ReplaySSM µs | "
        + "".join(f"{OTHER_DESIGNS[i]} µs | " for i in others)
        + "standard_helion µs | FLA µs | vs standard | vs FLA | ReplaySSM % copy |",
        "|---|---|---|" + "---|" * len(others) + "---|---|---|---|---|",
    ]
    other = {i: sel[sel.impl == i].set_index(["state_dtype", "cache_dtype", "cache_length"]) for i in others}
    for _, r in sp.sort_values(
        ["state_dtype", "cache_dtype", "cache_length"], ascending=[False, True, True]
    ).iterrows():
        key = (r.state_dtype, r.cache_dtype, r.cache_length)
        o_us = "".join(f"{o.us_per_step[key]:.1f} | " if key in o.index else "- | " for o in other.values())
        lines.append(
            f"| {r.state_dtype} / {r.cache_dtype} | {r.cache_length} | {r.us_per_step:.1f} | {o_us}"
            f"{r.us_standard_helion:.1f} | {r.us_fla_fused_recurrent:.1f} | {r.speedup_vs_standard_helion:.2f}× | "
            f"{r.speedup_vs_fla_fused_recurrent:.2f}× | {r.frac_of_copy:.0%} |"
        )
    base = sel[sel.impl.isin(BASELINES)]
    lines += ["", "| baseline | state | µs | % of copy |", "|---|---|---|---|"]
    for _, r in base.iterrows():
        lines.append(f"| {r.impl} | {r.state_dtype} | {r.us_per_step:.1f} | {r.frac_of_copy:.0%} |")
    return "\n".join(lines)


def shapes_markdown(df: pd.DataFrame) -> str:
    """Every configuration of the sweep at its best timed L, beside both baselines (best_cache_length.csv)."""
    best = best_cache_length(df)
    timed = df[df.impl == "replayssm_helion"].groupby(_shape_key(df) + ["cache_dtype"]).cache_length
    timed = timed.apply(lambda ls: "/".join(str(L) for L in sorted(ls)))
    lines = [
        "| batch | H | HV | K=V | state / ring | L timed | best L | ReplaySSM µs | vs standard | vs FLA | % copy |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in best.iterrows():
        key = tuple(r[c] for c in _shape_key(df) + ["cache_dtype"])
        lines.append(
            f"| {r.batch} | {r.num_q_heads} | {r.num_v_heads} | {r.key_dim} | {r.state_dtype} / {r.cache_dtype} | "
            f"{timed[key]} | {r.cache_length} | {r.us_per_step:.1f} | {r.speedup_vs_standard_helion:.2f}× | "
            f"{r.speedup_vs_fla_fused_recurrent:.2f}× | {r.frac_of_copy:.0%} |"
        )
    return "\n".join(lines)


def launches_markdown(lt: pd.DataFrame, rev: str) -> str:
    """Per-launch device time of a step (``profile_launches``): ring-weights vs state launch, per L."""
    kernel = lt.kernel.str.replace("_helion_", "").str.strip("_")
    lt = lt.assign(kernel=kernel, is_baseline=lt.impl != "replayssm_helion")
    lt = lt.sort_values(["is_baseline", "cache_length"])
    head = lt.iloc[0]
    lines = [
        f"B={head.batch}, H=HV={head.num_v_heads}, K=V={head.key_dim}, {head.state_dtype} state, "
        f"{head.device}, revision {rev}; µs of device time per step (CUPTI, no CUDA graph).",
        "",
        "| impl | L | ring weights (launch 1) | state (launch 2) | flush (launch 3) | step total |",
        "|---|---|---|---|---|---|",
    ]
    nan = float("nan")
    for (impl, L), g in lt.groupby(["impl", "cache_length"], sort=False):
        us = g.set_index("kernel").us_per_step
        if impl == "replayssm_helion":
            w = us.get("ring_weights_body", nan)
            # one state launch (flush rows inside it), or three launches: the state (#1) and flush (#2)
            # launches of one body, or the state launch and a flush launch over the flushing rows only
            st = us.get("replayssm_state_body", us.get("replayssm_state_body#1", nan))
            flush = us.get("replayssm_state_body#2", us.get("flush_rows_body"))
            flush = "in launch 2" if flush is None else f"{flush:.1f}"
            lines.append(f"| {impl} | {L} | {w:.1f} | {st:.1f} | {flush} | {us.sum():.1f} |")
        else:
            lines.append(f"| {impl} | - | - | - | - | {us.sum():.1f} |")
    return "\n".join(lines)


def summary_markdown(df: pd.DataFrame, err: pd.DataFrame, batch: int = 256, num_v_heads: int = 32,
                     err_rev: str = "unknown") -> str:  # fmt: skip
    """The status paragraph's numbers, from the CSVs (so the README never carries a typed figure)."""
    sel = _headline_rows(df, batch, num_v_heads)
    sp = speedups(sel)
    lines = []
    for sd in ("float32", "bfloat16"):
        base = sel[sel.state_dtype == sd].set_index("impl")
        if not {"standard_helion", "fla_fused_recurrent"} <= set(base.index):
            continue
        ratio = base.us_per_step["fla_fused_recurrent"] / base.us_per_step["standard_helion"]
        best = sp[sp.state_dtype == sd].sort_values("us_per_step").iloc[0]
        lines.append(
            f"- {sd} state, B={batch}, HV={num_v_heads}: our standard decode is {ratio:.2f}× FLA's speed at "
            f"{base.frac_of_copy['standard_helion']:.0%} of the copy ceiling (FLA "
            f"{base.frac_of_copy['fla_fused_recurrent']:.0%}); our best ReplaySSM (L={best.cache_length}, "
            f"{best.cache_dtype} ring) runs at {best.speedup_vs_standard_helion:.2f}× our standard decode and "
            f"{best.speedup_vs_fla_fused_recurrent:.2f}× FLA, {best.frac_of_copy:.0%} of the copy ceiling."
        )
    batches = ", ".join(str(int(b)) for b in sorted(df.batch.unique()))
    for impl, name in (("replayssm_helion", "ReplaySSM (the default design)"), *OTHER_DESIGNS.items()):
        all_sp = speedups(df, impl)
        if len(all_sp):
            lines.append(
                f"- Over the whole sweep ({len(all_sp)} rows of {name}, batch {batches}), it "
                f"beats our standard decode in {int((all_sp.speedup_vs_standard_helion > 1).sum())} rows and FLA "
                f"in {int((all_sp.speedup_vs_fla_fused_recurrent > 1).sum())}."
            )
    lines.append(
        f"- Kernel correctness on the GPU: {int(err.passed.astype(str).eq('True').sum())} of {len(err)} "
        f"`gpu_check` runs within tolerance, at revision {err_rev} (table below)."
    )
    return "\n".join(lines)


def errors_markdown(err: pd.DataFrame) -> str:
    worst = (
        err.fillna({"precision": "", "cache_dtype": ""})
        .groupby(["impl", "state_dtype", "cache_dtype", "precision"], dropna=False)
        .agg(
            runs=("case", "size"),
            max_out_rel=("max_out_rel", "max"),
            max_state_rel=("max_state_rel", "max"),
            passed=("passed", "all"),
        )  # fmt: skip
        .reset_index()
    )
    lines = ["| kernel | state / ring | mode | runs | worst out rel | worst checkpoint rel | all pass |"]
    lines.append("|---|---|---|---|---|---|---|")
    for _, r in worst.iterrows():
        ring = f" / {r.cache_dtype}" if r.cache_dtype else ""
        lines.append(
            f"| {r.impl} | {r.state_dtype}{ring} | {r.precision or '-'} | {r.runs} | {r.max_out_rel:.2e} | "
            f"{r.max_state_rel:.2e} | {'yes' if r.passed else 'NO'} |"
        )
    return "\n".join(lines)


def replace_block(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- BEGIN {name} -->\n).*?(<!-- END {name} -->)", re.S)
    if not pattern.search(text):
        raise ValueError(f"README has no block {name}")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def refresh(text: str | None, tag: str, bench_csv: Path, errors_csv: Path, launches_csv: Path) -> str | None:
    """Draw one result set's figures beside its CSVs and return ``text`` (the README) with its blocks
    (named with the suffix ``_<tag>`` when ``tag`` is set) rewritten."""
    df = load_bench(bench_csv)
    out = bench_csv.parent
    plot_time_vs_cache_length(df, out / "time_vs_cache_length.png")
    plot_speedup(df, out / "speedup.png")
    plot_bandwidth(df, out / "bandwidth.png")
    best_cache_length(df).to_csv(out / "best_cache_length.csv", index=False)
    err = pd.read_csv(errors_csv, keep_default_na=False)
    plot_kernel_errors(err, errors_csv.parent / "kernel_errors.png")
    if text is None:
        return None
    suffix = f"_{tag}" if tag else ""
    headline = headline_markdown(
        df, rev=revision(bench_csv), split=split_from(bench_csv), standard_l1=standard_at_l1(bench_csv)
    )
    text = replace_block(text, "HEADLINE" + suffix, headline)
    text = replace_block(text, "SUMMARY" + suffix, summary_markdown(df, err, err_rev=revision(errors_csv)))
    text = replace_block(text, "SHAPES" + suffix, shapes_markdown(df))
    if launches_csv.exists():
        lt = pd.read_csv(launches_csv)
        text = replace_block(text, "LAUNCHES" + suffix, launches_markdown(lt, revision(launches_csv)))
    return replace_block(text, "ERRORS" + suffix, errors_markdown(err))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m replayssm_kernels.plots")
    ap.add_argument("--bench-csv", type=Path, help="one result set only (default: the H200's, then OTHER_SETS)")
    ap.add_argument("--errors-csv", type=Path, default=ERRORS_CSV)
    ap.add_argument("--launches-csv", type=Path, default=LAUNCHES_CSV)
    ap.add_argument("--tag", default="", help="with --bench-csv: the README blocks' suffix (e.g. H100)")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md")
    args = ap.parse_args(argv)
    sets = [(args.tag, args.bench_csv or BENCH_CSV, args.errors_csv, args.launches_csv)]
    if args.bench_csv is None:
        sets += [s for s in OTHER_SETS if s[1].exists()]
    text = args.readme.read_text() if args.readme.exists() else None
    for tag, bench_csv, errors_csv, launches_csv in sets:
        text = refresh(text, tag, bench_csv, errors_csv, launches_csv)
        print(f"figures under {bench_csv.parent} and {errors_csv.parent}")
    if text is not None:
        args.readme.write_text(text)
        print(f"{args.readme} tables refreshed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
