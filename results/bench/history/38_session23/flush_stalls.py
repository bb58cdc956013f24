"""Run 38: where the all-flush state launch's warps wait, from Nsight Compute (raw/call1; raw/call3 the
same launch with the flush's dot on TF32 tensor cores, `flush_dot` "tf32").

    python results/bench/history/38_session23/flush_stalls.py   # writes flush_stalls.csv and stall_reasons.csv

and ``flush_stalls.env.json`` beside them (this machine and the raw files read; the GPU's environment is
each raw folder's own env.json).

flush_stalls.csv: the SASS of the two-launch state launch (fp32 state, L=16, every row flushing) cut into
straight runs of instructions that execute equally often; a run's `trips` is its executions per warp
(1: once per program, 4: the K loop at KC=32, 8: the flush's FK loop at FK=16). Per run: instructions
executed, warp stall samples, their share, and the samples of the top stall reasons; `flush_dot` names
the variant (ieee: the table's entry, FMAs; tf32).
stall_reasons.csv: every stall reason in cycles per issued instruction, for no / steady / all rows
flushing (and all with tf32), with each launch's duration, instructions executed and DRAM bytes read."""

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))
from replayssm_kernels.envinfo import write_env_json  # noqa: E402

RAW = HERE / "raw"
SOURCES = {"ieee": RAW / "call1" / "source_all_sass.csv", "tf32": RAW / "call3" / "source_all_sass_tf32.csv"}
DETAILS = [RAW / "call1" / "ncu_stalls.csv", RAW / "call3" / "ncu_stalls_tf32.csv"]


def _num(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s.astype(str).str.replace(",", ""), errors="coerce")


def regions(path: Path) -> pd.DataFrame:
    sass = pd.read_csv(path)
    reasons = [c for c in sass.columns if c.startswith("stall_") and "Not Issued" not in c]
    for c in ["Warp Stall Sampling (All Samples)", "Instructions Executed", *reasons]:
        sass[c] = _num(sass[c])
    execs = sass["Instructions Executed"]
    warps = execs.iloc[0]  # the kernel's first instruction runs once per warp
    run_id = (execs != execs.shift()).cumsum()
    total = sass["Warp Stall Sampling (All Samples)"].sum()
    rows = []
    for _, part in sass.groupby(run_id, sort=False):
        samples = part["Warp Stall Sampling (All Samples)"].sum()
        top = part[reasons].sum().sort_values(ascending=False)
        rows.append(
            {
                "first_sass_line": part.index[0],
                "last_sass_line": part.index[-1],
                "first_instruction": part["Source"].iloc[0].strip(),
                "trips": part["Instructions Executed"].iloc[0] / warps,
                "instructions_executed": int(part["Instructions Executed"].sum()),
                "stall_samples": int(samples),
                "share_of_samples": samples / total,
                **{f"top{i}_{k}": v for i, (k, v) in enumerate([("reason", r) for r in top.index[:3]], 1)},
                **{f"top{i}_samples": int(top.iloc[i - 1]) for i in (1, 2, 3)},
                "hottest_instruction": part.loc[part["Warp Stall Sampling (All Samples)"].idxmax(), "Source"].strip(),
                "hottest_samples": int(part["Warp Stall Sampling (All Samples)"].max()),
            }
        )
    out = pd.DataFrame(rows)
    # runs of a few instructions between the big ones are kept only where they hold 1% of the samples
    return out[out["share_of_samples"] >= 0.01].reset_index(drop=True)


def stall_reasons() -> pd.DataFrame:
    d = pd.concat([pd.read_csv(p) for p in DETAILS])
    d["value"] = _num(d["Metric Value"])
    s = d[d["Metric Name"].str.contains("issue_stalled", na=False)].copy()
    s["reason"] = s["Metric Name"].str.extract(r"stalled_(.*)_per_issue")[0]
    table = s.pivot_table(index="reason", columns="run", values="value")
    table = table[["none", "steady", "all", "all_tf32"]].sort_values("all", ascending=False)
    table.columns = [f"cycles_per_issue_{c}" for c in table.columns]
    metrics = ["Duration", "smsp__inst_executed.sum", "Warp Cycles Per Issued Instruction", "dram__bytes_read.sum"]
    extra = d[d["Metric Name"].isin(metrics)]
    extra = extra.pivot_table(index="Metric Name", columns="run", values="value")[["none", "steady", "all", "all_tf32"]]
    extra.columns = table.columns
    return pd.concat([table, extra]).rename_axis("reason_or_metric").reset_index()


if __name__ == "__main__":
    parts = [regions(p).assign(flush_dot=name) for name, p in SOURCES.items()]
    pd.concat(parts).to_csv(HERE / "flush_stalls.csv", index=False)
    stall_reasons().to_csv(HERE / "stall_reasons.csv", index=False)
    raw = [str(p.relative_to(HERE)) for p in [*SOURCES.values(), *DETAILS]]
    command = "python results/bench/history/38_session23/flush_stalls.py"
    write_env_json(HERE / "flush_stalls.env.json", config={"command": command, "reads": raw})
    print(pd.read_csv(HERE / "flush_stalls.csv").to_string())
    print(pd.read_csv(HERE / "stall_reasons.csv").round(2).to_string())
