"""Run 35: what ``flush_keep`` changed, entry against entry + flush_keep, side by side from one machine
(run here, from the repository root):

    python results/bench/history/35_session20/flush_keep_effect.py

Two sources, one row per comparison: ``raw/call1/trials.csv`` (the tuner: a whole step, µs per step,
steady cursors, per (L, state dtype); the entry is each part's first trial) and
``raw/call2/iso/launch_isolated.csv`` (each launch alone under a CUDA graph at L=16, with no, steady
and every row flushing; variant 0 is the entry, 1 the entry with flush_keep). ``change_pct`` is
``keep_us / entry_us - 1`` in percent. Writes ``flush_keep_effect.csv`` beside this file."""

import json
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
rows = []
trials = pd.read_csv(HERE / "raw/call1/trials.csv")
for _, t in trials.groupby("part", sort=False):
    keep = t[t.config.map(lambda c: json.loads(c).get("flush_keep", 0) == 1)]
    rows.append(
        dict(
            source="raw/call1/trials.csv", state_dtype=t.state_dtype.iloc[0], cache_length=t.cache_length.iloc[0],
            cursors="steady", launch="step", entry_us=t.us_per_step.iloc[0], keep_us=keep.us_per_step.iloc[0],
        )
    )  # fmt: skip
iso = pd.read_csv(HERE / "raw/call2/iso/launch_isolated.csv")
keys = ["state_dtype", "cache_length", "cursors", "launch"]
wide = iso.pivot_table(index=keys, columns="variant", values="us_per_launch", sort=False)
wide = wide.rename(columns={0: "entry_us", 1: "keep_us"}).reset_index()
wide.insert(0, "source", "raw/call2/iso/launch_isolated.csv")
out = pd.concat([pd.DataFrame(rows), wide], ignore_index=True)
out["change_pct"] = 100 * (out.keep_us / out.entry_us - 1)
out = out.round(2)
out.to_csv(HERE / "flush_keep_effect.csv", index=False)
print(out.to_string(index=False))
