#!/usr/bin/env bash
# Session 21's device calls (run 36), from the repository root with the wheels installed and OUT set:
#   CALL=1 bash results/bench/history/36_*/call_session21.sh
# CALL=1: on an H200, run 34's H200 plan unchanged (as run 35's CALL=1). On any other GPU, NOTES "What
# to try next" 1c (i): Helion's maxnreg, which 1.5.0 takes only with a persistent pid_type (run 35).
# flush_keep lost on the H100 because its second K loop raised the state launch's registers (fp32
# 120 -> 140, bf16 96 -> 128 on the device) and so cut the programs resident per SM (8 -> 6, 10 -> 8).
# For each L in LENGTHS (default 16) and state dtype (bf16 rings), four points of the two-launch
# design, each checked against the float64 recurrence first (tune.check_candidate):
#   0. the table's entry (flat grid);
#   1. the entry on a persistent_interleaved grid of MULT programs per SM, with maxnreg at the most
#      registers that keep MULT of them resident (64K a SM over MULT x 32 x num_warps threads, rounded
#      down to the allocation unit of 8): MULT is the entry's own residency, fp32 8 (cap 128), bf16 10
#      (cap 96);
#   2. point 1 with flush_keep;
#   3. point 1 without the cap (offline: 157 / 128 registers, so fewer resident than MULT).
# POINTS=n keeps the first n of them (a short call); MULT_FLOAT32=6 (say) sets MULT for that dtype (the
# cap follows it).
# Offline sm_90 (results/bench/codegen/state_kernels.csv, Triton 3.9): point 1 holds fp32 126 and bf16
# 96 registers, point 2 fp32 127, all without spills but point 2 bf16 (96, 8 bytes spilled).
# ../31_*/apply_run31.py then tables the fastest correct point where it beat the entry by 1% in this
# call; tuned.json comes back with trials.csv and env.json. Then the GPU tests of the persistent grid
# (tests/test_kernels_gpu.py -k persistent, into gpu_check/). No sweep (a change must be committed first).
# CALL=2 (after a CALL=1 whose tabled change was committed): the committed sweep.
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "${CALL:-1}/$GPU" in
*/*H200*) CALL=2 bash "$HERE"/../34_*/call_session19.sh ;;
1/*)
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
  T=replayssm_kernels/configs/$(python -c 'from replayssm_kernels.configs import device_key; print(device_key("cuda"))').json
  cp "$T" /tmp/table_before.json
  PARTS=$(mktemp -d) # this call's parts only (a warm machine keeps an earlier call's /tmp)
  for L in ${LENGTHS:-16}; do
    for sd in float32 bfloat16; do
      points=$(python - "$L" "$sd" <<'PY'
import json, os, sys
from replayssm_kernels.configs import device_key, lookup
from replayssm_kernels.kda_decode import LAUNCH_KINDS, default_launches, ring_block
L, sd = int(sys.argv[1]), sys.argv[2]
assert LAUNCH_KINDS[default_launches(L, "cuda")] == "replayssm", "this GPU's table runs another design here"
entry, _ = lookup("replayssm", device_key("cuda"), sd, f"K128-V128-LB{ring_block(L)}")
# the entry's programs per SM on the H100 (run 35's Nsight Compute); MULT_FLOAT32 / MULT_BFLOAT16 override
mult = int(os.environ.get(f"MULT_{sd.upper()}", 8 if sd == "float32" else 10))
cap = 65536 // (mult * 32 * entry["num_warps"]) // 8 * 8
grid = {"pid_type": "persistent_interleaved", "num_sm_multiplier": mult}
points = [entry, entry | grid | {"maxnreg": cap}, entry | grid | {"maxnreg": cap, "flush_keep": 1}, entry | grid]
print(json.dumps(points[: int(os.environ.get("POINTS", 4))]))
PY
)
      timeout "${TUNE_LIMIT:-130}" python -m replayssm_kernels.tune --kernels replayssm --cache-lengths "$L" \
        --dtype-pairs "$sd/bfloat16" --points "$points" --rep-ms 20 --trials-csv "$PARTS/L${L}_$sd.csv" 2>&1 |
        grep -v Warn
      python -c "import glob, os, pandas as pd
parts = sorted(glob.glob('$PARTS/*.csv'), key=os.path.getmtime)
pd.concat([pd.read_csv(p).assign(part=os.path.basename(p)[:-4]) for p in parts]).to_csv('$O/trials.csv', index=False)"
      [ -e "$O/env.json" ] || cp "$PARTS/env.json" "$O/env.json"
    done
  done
  cp /tmp/table_before.json "$T"
  python "$HERE"/../31_*/apply_run31.py "$T" "$O/trials.csv"
  cp "$T" "$O/tuned.json"
  # the GPU tests of the persistent points (L 4/8/16/64, both state dtypes, against float64)
  mkdir -p "$O/gpu_check"
  timeout "${TEST_LIMIT:-110}" python -m pytest -m gpu -q -p no:cacheprovider -k persistent \
    tests/test_kernels_gpu.py 2>&1 | grep -v Warn | tail -15 | tee "$O/gpu_check/console.txt"
  ;;
2/*) STAGES=full FULL_LIMIT=${FULL_LIMIT:-420} OUT=$O bash scripts/gpu_session.sh ;;
*) echo "CALL=${CALL:-} is not a call of this script" >&2; exit 3 ;;
esac
