"""Run 33's flush cost per launch, from its isolated profiles (run here, from the repository root):

    python results/bench/history/33_7b3c9e3-flush-cost/flush_cost.py

For each call, state dtype, variant and launch: the graph-timed microseconds with no rows flushing
(``none``), the benchmark's staggered cursors (``steady``: 1/16 of rows flush at L=16) and every row
flushing (``all``), then ``steady - none`` (what the flush adds to a step) and ``(all - none) / 16``
(the same, were the cost linear in flushing rows). Writes ``flush_cost.csv`` beside this file."""

from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
frames = []
for call, path in (("call1", "raw/call1/launch_isolated.csv"), ("call2", "raw/call2/iso/launch_isolated.csv")):
    t = pd.read_csv(HERE / path)
    p = t.pivot_table(index=["state_dtype", "variant", "extra", "launch"], columns="cursors", values="us_per_launch")
    p = p[["none", "steady", "all"]]
    p["steady_minus_none"] = p["steady"] - p["none"]
    p["all_minus_none_over_16"] = (p["all"] - p["none"]) / 16
    frames.append(p.round(1).reset_index().assign(call=call, device=t.device.iloc[0]))
out = pd.concat(frames)[["call", "device", "state_dtype", "variant", "extra", "launch", "none", "steady", "all",
                         "steady_minus_none", "all_minus_none_over_16"]]  # fmt: skip
out.to_csv(HERE / "flush_cost.csv", index=False)
print(out.to_string(index=False))
