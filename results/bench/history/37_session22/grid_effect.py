"""Run 37: the persistent grids against the table's entry, and the entry under both cursor orders, side
by side from one machine (run here, from the repository root):

    python results/bench/history/37_session22/grid_effect.py

Sources (one H100, env.json in each folder):
- ``raw/call1/trials.csv``: the tuner at L=16, a whole step in µs; each part (state dtype x cursor order)
  starts with the H100 table's entry, then the same on persistent grids (``call_session22.sh``). Its
  register columns are the device's own compile (``inspect_codegen.device_resources``).
- ``raw/call4/keep_*.csv``: the entry against the entry with ``flush_keep`` (flat grid), for the register
  readout beside run 35's Nsight Compute figures (fp32 120 → 140, bf16 96 → 128).
- ``raw/call3/{regular,shuffled}/decode_throughput.csv``: the benchmark's default design at B=256, HV=32,
  L = 8 and 16, with the regular cursors and with ``--cursor-seed 0``.

Writes ``grid_effect.csv`` (one row per tuned point: its grid, ``change_pct`` = us_per_step / entry_us - 1
in percent, the state launch's registers, local bytes and programs per SM, and, for the persistent
points, ``predicted_critical_over_mean`` from ``persistent_balance.csv``, the offline model) and
``cursor_order.csv`` (each bench row, regular against shuffled)."""

import json
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
balance = pd.read_csv(HERE / "persistent_balance.csv")
trials = pd.concat(
    [pd.read_csv(HERE / "raw/call1/trials.csv")]
    + [pd.read_csv(p).assign(part=p.stem) for p in sorted((HERE / "raw/call4").glob("keep_*.csv"))]
)
rows = []
for part, group in trials.groupby("part", sort=False):
    entry_us = group.us_per_step.iloc[0]
    for _, t in group.iterrows():
        cfg = json.loads(t.config)
        pid, mult = cfg.get("pid_type", "flat"), cfg.get("num_sm_multiplier", "")
        order = "shuffled" if t.cursor_seed == t.cursor_seed else "regular"  # NaN: the regular order
        predicted = balance[
            (balance.pid_type == pid) & (balance.num_sm_multiplier == (mult or 0)) & (balance.cursors == order)
        ][f"critical_over_mean_{t.state_dtype}"]
        rows.append(
            dict(
                source=f"raw/{'call1' if part.startswith('L') else 'call4'}", part=part, state_dtype=t.state_dtype,
                cache_length=t.cache_length, cursors=order, pid_type=pid, num_sm_multiplier=mult,
                maxnreg=cfg.get("maxnreg", ""), flush_keep=cfg.get("flush_keep", 0), us_per_step=t.us_per_step,
                entry_us=entry_us, change_pct=100 * (t.us_per_step / entry_us - 1), max_rel=t.max_rel,
                correct=t.correct, state_registers=t.state_registers, state_local_bytes=t.state_local_bytes,
                state_programs_per_sm=t.state_programs_per_sm,
                predicted_critical_over_mean=predicted.iloc[0] if len(predicted) else "",
            )
        )  # fmt: skip
out = pd.DataFrame(rows).round({"us_per_step": 2, "entry_us": 2, "change_pct": 1})
out.to_csv(HERE / "grid_effect.csv", index=False)
print(out.drop(columns=["source", "part"]).to_string(index=False))

keys = ["impl", "batch", "num_v_heads", "cache_length", "state_dtype", "cache_dtype"]
bench = {o: pd.read_csv(HERE / f"raw/call3/{o}/decode_throughput.csv") for o in ("regular", "shuffled")}
both = bench["regular"].merge(bench["shuffled"], on=keys, suffixes=("_regular", "_shuffled"))
order = both[keys + ["us_per_step_regular", "us_per_step_shuffled"]].copy()
order["change_pct"] = 100 * (order.us_per_step_shuffled / order.us_per_step_regular - 1)
order = order.round({"us_per_step_regular": 2, "us_per_step_shuffled": 2, "change_pct": 2})
order.to_csv(HERE / "cursor_order.csv", index=False)
print(order.to_string(index=False))
