"""Run 36: what the persistent grid under ``maxnreg`` changed, against the table's entry, side by side
from one call (run here, from the repository root):

    python results/bench/history/36_session21/persistent_effect.py

Source: ``raw/call1/trials.csv`` (the tuner: a whole step at L=16, µs per step, steady cursors; each
part's first trial is the H100 table's entry, the others are the entry with the grid options of
``call_session21.sh``). One row per timed point: its grid options, ``max_rel`` against the float64
recurrence, and ``change_pct``, ``us_per_step / entry_us - 1`` in percent. Writes
``persistent_effect.csv`` beside this file."""

import json
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
OPTIONS = ("pid_type", "num_sm_multiplier", "maxnreg", "flush_keep")
rows = []
for _, part in pd.read_csv(HERE / "raw/call1/trials.csv").groupby("part", sort=False):
    entry_us = part.us_per_step.iloc[0]
    for _, t in part.iterrows():
        cfg = json.loads(t.config)
        rows.append(
            dict(
                state_dtype=t.state_dtype, cache_length=t.cache_length, **{o: cfg.get(o, "") for o in OPTIONS},
                us_per_step=t.us_per_step, entry_us=entry_us, change_pct=100 * (t.us_per_step / entry_us - 1),
                max_rel=t.max_rel, correct=t.correct,
            )
        )  # fmt: skip
out = pd.DataFrame(rows).round({"us_per_step": 2, "entry_us": 2, "change_pct": 1})
out.to_csv(HERE / "persistent_effect.csv", index=False)
print(out.to_string(index=False))
