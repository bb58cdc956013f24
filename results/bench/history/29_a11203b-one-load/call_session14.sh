#!/usr/bin/env bash
# Session 14's device calls (run 29), from the repository root with the wheels installed and OUT set:
#   CALL=1 bash results/bench/history/29_*/call_session14.sh
#     1. tune the split design at L = 16, 8, 64 over scripts/points_split_next.json (the L=16 entry of
#        run 28; overlap 2 + handed weights over 528 and 264 flush programs; two items that load their
#        checkpoint tile once, [64, 128] and [32, 128] at 8 warps), merged into the device's table;
#     2. each launch of the tuned L=16 step alone and the whole step (profile_launches --isolated);
#     3. GPU tests of the flush launch beside the state launch with handed weights (pytest -k beside_weights).
#   CALL=2 bash results/bench/history/29_*/call_session14.sh    (on the same warm machine)
#     the tuned table from call 1 (REUSE_TUNED=1), the per-launch profile and the committed sweep.
# Stage limits come from the environment (TUNE_LIMIT, ISO_LIMIT, PYTEST_LIMIT, FULL_LIMIT; 0 skips).
set -uo pipefail
O=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
# a GPU with no table of its own starts from the H200's (tuned entries then replace their classes)
T=replayssm_kernels/configs/$(python -c 'from replayssm_kernels.configs import device_key; print(device_key("cuda"))').json
[ -e "$T" ] || cp replayssm_kernels/configs/nvidia_h200.json "$T"
if [ "${CALL:-1}" = 1 ]; then
  [ "${TUNE_LIMIT:-330}" = 0 ] || STAGES=tune TUNE_LENGTHS="16 8 64" TUNE_LIMIT=${TUNE_LIMIT:-330} \
    POINTS="$(cat scripts/points_split_next.json)" OUT=$O bash scripts/gpu_session.sh
  [ "${ISO_LIMIT:-60}" = 0 ] || timeout "${ISO_LIMIT:-60}" python -m replayssm_kernels.profile_launches --isolated \
    --cursors steady --cache-lengths 16 --dtype-pairs float32/bfloat16 bfloat16/bfloat16 --out "$O/iso" 2>&1 | grep -v Warn
  [ "${PYTEST_LIMIT:-90}" = 0 ] || STAGES=pytest PYTEST_K="beside_weights" PYTEST_LIMIT=${PYTEST_LIMIT:-90} OUT=$O \
    bash scripts/gpu_session.sh
else
  REUSE_TUNED=1 STAGES="profile full" FULL_LIMIT=${FULL_LIMIT:-480} OUT=$O bash scripts/gpu_session.sh
fi
rmdir "$O"/* 2>/dev/null || true  # gpu_session.sh's empty stage folders
