#!/usr/bin/env bash
# Session 20's device calls, from the repository root with the wheels installed and OUT set:
#   CALL=1 bash results/bench/history/35_*/call_session20.sh
# CALL=1: on an H200, run 34's H200 plan unchanged (../34_*/call_session19.sh CALL=2: the H100's entries
# into the H200 table, L=16 timed for both designs with flush_keep among the two-launch points, then the
# committed sweep). On any other GPU: the timing half of run 34's plan first (Nsight Compute waits for a
# later call, so that a win leaves device time for a sweep): the table's entry at L = 16 and 8, both state
# dtypes, against the same entry with flush_keep; ../31_*/apply_run31.py tables it where it beat the
# entry by 1% in this call; tuned.json comes back, no sweep.
# CALL=2 (after a CALL=1 that tabled flush_keep and was committed as the table): the committed sweep.
# CALL=3 (after a CALL=1 where flush_keep lost): Nsight Compute on the steady state launch with
# flush_keep (did the hint keep the tiles in L2?), then the isolated L=16 profile with and without it.
# CALL=4 (after CALL=3 showed flush_keep's second K loop raising the registers, 120 -> 140 fp32 and
# 96 -> 128 bf16, and the occupancy with them): at L=16, the entry against the entry with flush_keep
# and Helion's maxnreg at the entry's own count (fp32 120, bf16 96: offline sm_90 fits both without
# spills), each state dtype a tune part of its own; times only, nothing tabled. It ran, and Helion
# 1.5.0 refused both capped points (InvalidConfig: maxnreg only with a persistent pid_type).
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "${CALL:-1}/$GPU" in
*/*H200*) CALL=2 bash "$HERE"/../34_*/call_session19.sh ;;
1/*)
  VARIANTS='[{"flush_keep": 1}]' LENGTHS="${LENGTHS:-16 8}" CALL=1 TUNE_LIMIT=${TUNE_LIMIT:-70} FULL_LIMIT=0 \
    bash "$HERE"/../31_*/call_session16.sh ;;
2/*) STAGES=full FULL_LIMIT=${FULL_LIMIT:-420} OUT=$O bash scripts/gpu_session.sh ;;
3/*)
  EXTRA='{"flush_keep": 1}' MODES=steady OUT="$O/ncu_keep" timeout 150 bash "$HERE"/../33_*/call_ncu.sh 2>&1 |
    grep -v '(16384, 1, 1)'
  timeout "${ISO_LIMIT:-200}" python -m replayssm_kernels.profile_launches --isolated \
    --cursors none steady all --cache-lengths 16 --dtype-pairs float32/bfloat16 bfloat16/bfloat16 \
    --extra '[{}, {"flush_keep": 1}]' --out "$O/iso" 2>&1 | grep -v Warn | tail -40 ;;
4/*)
  for sd in float32 bfloat16; do
    cap=$([ "$sd" = float32 ] && echo 120 || echo 96)
    points=$(python -c "import json; from replayssm_kernels.configs import device_key, lookup
entry, _ = lookup('replayssm', device_key('cuda'), '$sd', 'K128-V128-LB16')
print(json.dumps([entry, entry | {'flush_keep': 1, 'maxnreg': $cap}]))")
    timeout "${TUNE_LIMIT:-100}" python -m replayssm_kernels.tune --kernels replayssm --cache-lengths 16 \
      --dtype-pairs "$sd/bfloat16" --points "$points" --rep-ms 20 --trials-csv "$O/$sd/trials.csv" 2>&1 | grep -v Warn
  done ;;
esac
