#!/usr/bin/env bash
# Session 23's device calls, from the repository root with the wheels installed and OUT set:
#   CALL=1 bash results/bench/history/38_*/call_session23.sh
# On an H200 (any CALL): ../37_*/call_h200_short.sh (NOTES item 0's short form, ~200 s).
# CALL=2 on any other GPU: more warps per checkpoint element in the two-launch state launch, where call 1
# read the flush's FK loop as bound by its instructions (call 3 then showed it is not): the tuner at L = 16 then 8, both state dtypes, the
# table's entry against the same entry with a [64, 32] tile at 4 and 8 warps and a [32, 32] tile at
# 2 warps (offline sm_90, fp32 L=16: 72 / 64 / 72 registers against the entry's 119). Times only.
# CALL=3 on any other GPU: call 1's profile of the all-flush launch again with flush_dot tf32 (the
# rank-16 update on tensor cores, run 33: no faster), to see what the dot saves in instructions and what
# it adds (EXTRA and MODES below; files named *_tf32).
# CALL=4 on any other GPU: launch 1 (ring weights, NOTES item 3) under Nsight Compute the same way,
# fp32 state, steady and every row flushing (ncu_launch.py; files named *_launch1).
# Calls 1 and 3 ran before the source page's first line was dropped here and the DRAM bytes written were
# added to the metrics (the README says what changed).
# CALL=1 on any other GPU: NOTES item 1 (iii), what a flush item waits on. Nsight Compute on the two-launch
# state launch at L=16 (the table's entry, fp32 state, bf16 rings) with no, steady and every row
# flushing: the warp-state section plus every stall reason as cycles per issued instruction
# (smsp__average_warps_issue_stalled_*_per_issue_active), then, for the all-flush launch, the
# per-SASS-instruction stall samples (SourceCounters, source page as CSV).
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "gpu: $GPU"
case "$GPU" in *H200*) exec bash "$HERE"/../37_*/call_h200_short.sh ;; esac
if [ "${CALL:-1}" = 2 ]; then
  for L in 16 8; do
    for sd in float32 bfloat16; do
      points=$(python -c "import json; from replayssm_kernels.configs import device_key, lookup
entry, _ = lookup('replayssm', device_key('cuda'), '$sd', 'K128-V128-LB$L')
tiles = [([64, 32], 4), ([32, 32], 2), ([64, 32], 8)]
print(json.dumps([entry] + [entry | {'block_sizes': b, 'num_warps': w} for b, w in tiles]))")
      timeout "${TUNE_LIMIT:-140}" python -m replayssm_kernels.tune --kernels replayssm --cache-lengths "$L" \
        --dtype-pairs "$sd/bfloat16" --points "$points" --rep-ms 20 --trials-csv "$O/L$L/$sd/trials.csv" 2>&1 |
        grep -v Warn | tail -8
    done
  done
  exit
fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
"$NCU" --version | tail -1
EXTRA='{}'
TAG=
STATE="$HERE/../33_7b3c9e3-flush-cost/ncu_state.py"
if [ "${CALL:-1}" = 3 ]; then EXTRA='{"flush_dot": "tf32"}'; TAG=_tf32; MODES=${MODES:-all}; fi
if [ "${CALL:-1}" = 4 ]; then STATE="$HERE/ncu_launch.py"; TAG=_launch1; MODES=${MODES:-steady all}; SRC_MODE=steady; fi
EXTRA=$EXTRA STATE=$STATE python - "$O/env$TAG.json" <<'PY'
import os, sys
from pathlib import Path
from replayssm_kernels.envinfo import write_env_json
write_env_json(Path(sys.argv[1]), {"command": "bash results/bench/history/38_session23/call_session23.sh",
    "what": "ncu on " + os.environ["STATE"] + " --dtype float32 (B=256, HV=32, K=V=128, L=16, bf16 rings)",
    "extra": os.environ["EXTRA"]})
PY
STALLS='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
for mode in ${MODES:-none steady all}; do
  timeout 150 "$NCU" --clock-control none --nvtx --nvtx-include prof/ --section WarpStateStats \
    --section SpeedOfLight --section Occupancy --metrics "$STALLS,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum" \
    --csv --page details python "$STATE" --mode "$mode" --dtype float32 --extra "$EXTRA" >"$O/raw_$mode$TAG.csv" 2>>"$O/ncu_err.txt"
  echo "$mode rc=$? $(grep -c '^"' "$O/raw_$mode$TAG.csv") rows"
done
timeout 200 "$NCU" --clock-control none --nvtx --nvtx-include prof/ --section SourceCounters --section WarpStateStats \
  -f -o /tmp/all_src python "$STATE" --mode "${SRC_MODE:-all}" --dtype float32 --extra "$EXTRA" >/dev/null 2>>"$O/ncu_err.txt"
echo "source report rc=$?"
# (its first line names the kernel, in fewer fields than the table: dropped, so the CSV is rectangular)
"$NCU" --import /tmp/all_src.ncu-rep --page source --print-source sass --csv 2>>"$O/ncu_err.txt" | tail -n +2 \
  >"$O/source_${SRC_MODE:-all}_sass$TAG.csv"
echo "source page rc=$? $(wc -l <"$O/source_${SRC_MODE:-all}_sass$TAG.csv") lines"
tail -5 "$O/ncu_err.txt"
TAG=$TAG python - "$O" <<'PY'  # ncu's CSV follows the program's output: keep its quoted rows, one file for the three modes
import glob, io, os, sys, pandas as pd
out = sys.argv[1]
frames = []
for p in sorted(glob.glob(f"{out}/raw_*.csv")):
    rows = [line for line in open(p) if line.startswith('"')]
    if rows:
        frames.append(pd.read_csv(io.StringIO("".join(rows))).assign(run=os.path.basename(p)[4:-4]))
        os.remove(p)
if frames:
    d = pd.concat(frames)
    d.to_csv(f"{out}/ncu_stalls{os.environ.get('TAG', '')}.csv", index=False)
    s = d[d["Metric Name"].str.contains("issue_stalled", na=False)].copy()
    s["reason"] = s["Metric Name"].str.extract(r"stalled_(.*)_per_issue")[0]
    s["v"] = pd.to_numeric(s["Metric Value"].astype(str).str.replace(",", ""), errors="coerce")
    print(s.pivot_table(index="reason", columns="run", values="v").sort_values(s["run"].max() if "all" not in set(s["run"]) else "all", ascending=False).round(2).to_string())
PY
