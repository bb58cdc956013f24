#!/usr/bin/env bash
# Session 22's device call (run 37), from the repository root with the wheels installed and OUT set:
#   CALL=1 bash results/bench/history/37_*/call_session22.sh
# On an H200: run 34's H200 plan unchanged (as runs 35-36's CALL=1; tune's trials now carry the device's
# register columns). On any other GPU: why run 36's persistent grid was slower (NOTES 1c (i)).
# persistent_balance.py (offline) predicts it: Helion's persistent_interleaved grid of 132 x 8 programs
# deals program p the items p, p + 1056, ..., all in rows of one residue mod 16, and the bench's cursors
# (row % L) flush one such residue a step, so 1 program in 16 gets all its ~16 items flushing.
# persistent_blocked (runs of 16 consecutive rows) gets one each. With cursors dealt to rows in a random
# order (tune --cursor-seed 0) both grids are unbalanced and only the flat grid's hardware scheduling
# evens them out. At L in LENGTHS (default 16), per state dtype (bf16 rings), tune times, each point
# checked against float64 first: the table's entry (flat grid), then each token of GRIDS_FLOAT32 /
# GRIDS_BFLOAT16 ("pid:M:R" = persistent_<pid>, M programs per SM, maxnreg R; ":keep" adds flush_keep);
# defaults fp32 "interleaved:8:128 blocked:8:128 blocked:8:128:keep" and bf16 the same at 10:96 (the
# entry's own residency, run 35). Once with the regular cursors, then with the shuffled ones (points
# without :keep). tune now also records each launch's registers, spills and programs_per_sm as the
# device compiled them. Nothing is tabled (a diagnosis: a point that wins only under the regular
# cursors would not win in a server). Then the GPU tests of the persistent grid and of the readout.
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$GPU" in
*H200*) CALL=2 bash "$HERE"/../34_*/call_session19.sh ;;
*)
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
  T=replayssm_kernels/configs/$(python -c 'from replayssm_kernels.configs import device_key; print(device_key("cuda"))').json
  cp "$T" /tmp/table_before.json
  PARTS=$(mktemp -d)
  for L in ${LENGTHS:-16}; do
    for order in regular shuffled; do
      for sd in float32 bfloat16; do
        cp /tmp/table_before.json "$T" # each part's entry is the committed table's (tune writes the table)
        points=$(ORDER=$order python - "$L" "$sd" <<'PY'
import json, os, sys
from replayssm_kernels.configs import device_key, lookup
from replayssm_kernels.kda_decode import LAUNCH_KINDS, default_launches, ring_block
L, sd = int(sys.argv[1]), sys.argv[2]
assert LAUNCH_KINDS[default_launches(L, "cuda")] == "replayssm", "this GPU's table runs another design here"
entry, _ = lookup("replayssm", device_key("cuda"), sd, f"K128-V128-LB{ring_block(L)}")
res = "8:128" if sd == "float32" else "10:96"
default = f"interleaved:{res} blocked:{res} blocked:{res}:keep"
points = [entry]
for token in os.environ.get(f"GRIDS_{sd.upper()}", default).split():
    pid, mult, cap, *keep = token.split(":")
    if keep and os.environ["ORDER"] == "shuffled":
        continue
    point = entry | {"pid_type": f"persistent_{pid}", "num_sm_multiplier": int(mult), "maxnreg": int(cap)}
    points.append(point | ({"flush_keep": 1} if keep else {}))
print(json.dumps(points))
PY
)
        seed=$([ "$order" = shuffled ] && echo "--cursor-seed 0")
        timeout "${TUNE_LIMIT:-100}" python -m replayssm_kernels.tune --kernels replayssm --cache-lengths "$L" \
          --dtype-pairs "$sd/bfloat16" --points "$points" --rep-ms 20 $seed \
          --trials-csv "$PARTS/L${L}_${sd}_$order.csv" 2>&1 | grep -v Warn
        python -c "import glob, os, pandas as pd
parts = sorted(glob.glob('$PARTS/*.csv'), key=os.path.getmtime)
pd.concat([pd.read_csv(p).assign(part=os.path.basename(p)[:-4]) for p in parts]).to_csv('$O/trials.csv', index=False)"
        [ -e "$O/env.json" ] || cp "$PARTS/env.json" "$O/env.json"
      done
    done
  done
  cp /tmp/table_before.json "$T"  # nothing tabled
  mkdir -p "$O/gpu_check"
  timeout "${TEST_LIMIT:-120}" python -m pytest -m gpu -q -p no:cacheprovider -k "persistent or device_resources" \
    tests/test_kernels_gpu.py 2>&1 | grep -v Warn | tail -15 | tee "$O/gpu_check/console.txt"
  ;;
esac
