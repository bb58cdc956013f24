#!/usr/bin/env bash
# Session 13's device calls for run 28 (H200), from the repository root with the wheels installed and OUT set:
#   CALL=1 bash results/bench/history/28_*/call_session13.sh
#     1. tune the split design at L = 16, 8, 64 over points_session13.json (the L=16 entry as it is;
#        with flush_overlap 2 + flush_weights; overlap 1 + weights; overlap 2 + weights over 264 flush
#        programs; the L=8 fp32 entry, which flushes in the state launch), merged into the device's table;
#     2. each launch of the tuned L=16 step alone and the whole step (profile_launches --isolated);
#     3. the split design below L = 8 beside the default (two launches) at the headline shape;
#     4. GPU tests of the flush launch beside the state launch (pytest -k beside).
#   CALL=2 bash results/bench/history/28_*/call_session13.sh    (after committing call 1's tuned table)
#     the committed sweep and per-launch profile: STAGES="profile full" scripts/gpu_session.sh
# Stage limits come from the environment (TUNE_LIMIT, ISO_LIMIT, SPLIT_LIMIT, PYTEST_LIMIT, FULL_LIMIT; 0 skips).
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
# a GPU with no table of its own starts from the H200's (tuned entries then replace their classes)
T=replayssm_kernels/configs/$(python -c 'from replayssm_kernels.configs import device_key; print(device_key("cuda"))').json
[ -e "$T" ] || cp replayssm_kernels/configs/nvidia_h200.json "$T"
if [ "${CALL:-1}" = 1 ]; then
  [ "${TUNE_LIMIT:-300}" = 0 ] || STAGES=tune TUNE_LENGTHS="16 8 64" TUNE_LIMIT=${TUNE_LIMIT:-300} \
    POINTS="$(cat "$HERE/points_session13.json")" OUT=$O bash scripts/gpu_session.sh
  [ "${ISO_LIMIT:-60}" = 0 ] || timeout "${ISO_LIMIT:-60}" python -m replayssm_kernels.profile_launches --isolated \
    --cursors steady --cache-lengths 16 --dtype-pairs float32/bfloat16 bfloat16/bfloat16 --out "$O/iso" 2>&1 | grep -v Warn
  [ "${SPLIT_LIMIT:-70}" = 0 ] || timeout "${SPLIT_LIMIT:-70}" python -m replayssm_kernels.bench --out "$O/bench" \
    --max-sets 16 --rep-ms 30 --batch 256 --heads 32 --gqa 1 --dtype-pairs float32/bfloat16 bfloat16/bfloat16 \
    --impls replayssm_helion replayssm_helion_split --cache-lengths 1 2 4 8 2>&1 | grep -v Warn
  [ "${PYTEST_LIMIT:-90}" = 0 ] || STAGES=pytest PYTEST_K="beside" PYTEST_LIMIT=${PYTEST_LIMIT:-90} OUT=$O \
    bash scripts/gpu_session.sh
  rmdir "$O"/* 2>/dev/null || true  # gpu_session.sh's empty stage folders
else
  STAGES="profile full" FULL_LIMIT=${FULL_LIMIT:-470} OUT=$O bash scripts/gpu_session.sh
  rmdir "$O"/* 2>/dev/null || true
fi
