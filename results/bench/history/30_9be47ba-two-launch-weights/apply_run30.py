"""Run 30's table change, from its measurements (run here, on the CPU, from the repository root):

    python results/bench/history/30_9be47ba-two-launch-weights/apply_run30.py [TABLE] [TRIALS_CSV]

For L = 8 and 16 and each state dtype, the fastest correct two-launch config of ``TRIALS_CSV``
becomes the table's ``replayssm/<dtype>/K128-V128-LB<L>`` entry; where it beat the split entry timed
in the same call at both L and both dtypes, the table's ``split_flush_from_l`` becomes 32, so that
``launches=None`` runs two launches up to L = 16 on that GPU. Defaults: the H100's table and this
folder's ``raw/call1/trials.csv``."""

import json
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
table_path = Path(sys.argv[1] if len(sys.argv) > 1 else "replayssm_kernels/configs/nvidia_h100_80gb_hbm3.json")
trials_path = Path(sys.argv[2] if len(sys.argv) > 2 else HERE / "raw/call1/trials.csv")
doc = json.loads(table_path.read_text())
t = pd.read_csv(trials_path)
t = t[t.correct]
two_wins = True
for (sd, L), g in t[t.cache_length.isin([8, 16])].groupby(["state_dtype", "cache_length"]):
    two = g[g.kernel == "replayssm"].sort_values("us_per_step")
    split = g[g.kernel == "replayssm_split"].us_per_step.min()
    if two.empty:
        two_wins = False
        continue
    best = two.iloc[0]
    doc["configs"][f"replayssm/{sd}/K128-V128-LB{L}"] = json.loads(best.config)
    two_wins &= bool(best.us_per_step < split)
    print(f"{sd} L={L}: two launches {best.us_per_step:.1f} us, split {split:.1f} us")
if two_wins:
    doc["split_flush_from_l"] = 32
doc["tuned_by"] += f" || replayssm LB8 / LB16 and split_flush_from_l: {HERE}/apply_run30.py over {trials_path}"
doc = {k: doc[k] for k in ("device", "tuned_by", "split_flush_from_l", "configs") if k in doc}
table_path.write_text(json.dumps(doc, indent=1) + "\n")
print(f"wrote {table_path}: split_flush_from_l = {doc.get('split_flush_from_l', 'unset')}")
