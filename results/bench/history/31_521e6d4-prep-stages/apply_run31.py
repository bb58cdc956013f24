"""Run 31's table change, from its measurements (run on the device by ``call_session16.sh`` ``CALL=1``,
or here on the CPU from the repository root):

    python results/bench/history/31_521e6d4-prep-stages/apply_run31.py TABLE TRIALS_CSV

Each tune part of ``TRIALS_CSV`` (its ``part`` column) timed one table entry (the part's first trial)
and variants of it (``CALL=1``: ``prep_stages`` / ``ring_chunk``; ``CALL=3``: state tiles), for one
(design, L, state dtype). The fastest correct variant replaces the entry's class
(``<kind>/<dtype>/K128-V128-LB<ring block>``) only where it beat the entry by at least ``MARGIN`` in
the same call: smaller gaps are within the run-to-run spread of a tune trial. Nothing else in the
table changes."""

import json
import sys
from pathlib import Path

import pandas as pd

from replayssm_kernels.kda_decode import ring_block

MARGIN = 0.01
table_path, trials_path = Path(sys.argv[1]), Path(sys.argv[2])
doc = json.loads(table_path.read_text())
t = pd.read_csv(trials_path)
changed = []
for _, g in t.groupby("part", sort=False):
    kind, sd, L = g.kernel.iloc[0], g.state_dtype.iloc[0], g.cache_length.iloc[0]
    good = g[g.correct].sort_values("us_per_step")
    if good.empty:
        continue
    entry_us, best = float(g.us_per_step.iloc[0]), good.iloc[0]
    verdict = "kept the entry"
    if best.config != g.config.iloc[0] and best.us_per_step < (1 - MARGIN) * entry_us:
        key = f"{kind}/{sd}/K128-V128-LB{ring_block(int(L))}"
        doc["configs"][key] = json.loads(best.config)
        changed.append(key)
        verdict = f"tabled {key}"
    print(f"{kind} {sd} L={L}: entry {entry_us:.1f} us, best {best.us_per_step:.1f} us: {verdict}")
if changed:
    doc["tuned_by"] += f" || {', '.join(changed)}: {Path(__file__).name} over {trials_path}"
table_path.write_text(json.dumps(doc, indent=1) + "\n")
print(f"wrote {table_path}: {len(changed)} entries changed")
