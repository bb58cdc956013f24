"""Run 34's Nsight Compute profiles of the two-launch state launch at L=16, one row per profile (run
here, from the repository root):

    python results/bench/history/34_session19/ncu_summary.py [HISTORY_FOLDER ...] [--out CSV]

From ``raw/*/ncu_state.csv`` of each history folder given (default: this one), as
``../33_*/call_ncu.sh`` writes it (a ``run`` column names state dtype and cursors; a ``ncu_keep``
folder holds profiles with ``flush_keep``): the kernel's duration, DRAM bytes read and written, its
DRAM throughput and L2 hit rate, and against the same dtype's profile with no row flushing (``none``;
from the same folder where it has one, named in ``baseline``): the bytes and time the flush adds.
``extra_read_per_extra_write`` is the extra DRAM reads per extra byte written: the flush writes each
flushing row's checkpoint tile once, so a value near 1 means those tiles (and little else) were read
from DRAM a second time. Writes ``--out`` (default ``ncu_summary.csv`` beside this file); ``source``
names each profile's folder from ``results/bench/history``."""

import argparse
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
ap = argparse.ArgumentParser()
ap.add_argument("folders", type=Path, nargs="*", default=[HERE])
ap.add_argument("--out", type=Path, default=HERE / "ncu_summary.csv")
args = ap.parse_args()
METRICS = {
    "Duration": "duration_us",
    "dram__bytes_read.sum": "dram_read_mb",
    "dram__bytes_write.sum": "dram_write_mb",
    "DRAM Throughput": "dram_throughput_pct",
    "L2 Hit Rate": "l2_hit_pct",
    "Registers Per Thread": "registers",
    "Achieved Occupancy": "achieved_occupancy_pct",
}
SCALE = {"duration_us": 1e-3, "dram_read_mb": 1e-6, "dram_write_mb": 1e-6}
rows = []
for path in sorted(p for folder in args.folders for p in folder.resolve().glob("raw/*/**/ncu_state.csv")):
    t = pd.read_csv(path)
    t = t[t["Metric Name"].isin(METRICS)].drop_duplicates(["run", "Metric Name"])
    wide = t.pivot(index="run", columns="Metric Name", values="Metric Value").rename(columns=METRICS)
    wide = wide.apply(lambda col: col.astype(str).str.replace(",", "").astype(float))
    for col, scale in SCALE.items():
        wide[col] = wide[col] * scale
    wide = wide.reset_index()
    wide[["state_dtype", "cursors"]] = wide["run"].str.rsplit("_", n=1, expand=True)
    wide["source"] = str(path.relative_to(HERE.resolve().parent).parent)
    wide["flush_keep"] = int("keep" in wide["source"].iloc[0])
    rows.append(wide.drop(columns="run"))
out = pd.concat(rows)
# the baseline of a profile: the same dtype's none, from its own folder where that has one, else from
# the folder that does (a later call may profile steady only; bytes do not depend on the machine)
nones = out[out.cursors == "none"]


def baseline(row):
    same = nones[(nones.state_dtype == row.state_dtype) & (nones.source == row.source)]
    return (same if len(same) else nones[nones.state_dtype == row.state_dtype]).iloc[0]


bases = pd.DataFrame([baseline(row) for row in out.itertuples()])
out["baseline"] = bases["source"].values + "/" + bases["state_dtype"].values + "_none"
for col in ("duration_us", "dram_read_mb", "dram_write_mb"):
    out[f"extra_{col}"] = out[col].values - bases[col].values
out["extra_read_per_extra_write"] = out["extra_dram_read_mb"] / out["extra_dram_write_mb"]
order = ["source", "flush_keep", "state_dtype", "cursors", *METRICS.values(), "baseline"]
out = out[order + [c for c in out.columns if c.startswith("extra_")]].round(2)
out.to_csv(args.out, index=False)
print(out.to_string(index=False))
