#!/usr/bin/env bash
# Session 14's device calls (run 29), from the repository root with the wheels installed and OUT set:
#   CALL=1 bash results/bench/history/29_*/call_session14.sh
#     1. tune the split design at L = 16 and 8 over points_session14.json: the H200's L=16 entry as it
#        is (run 26); the H100's (run 28: overlap 2 + handed weights); and flush-rows items that load
#        their checkpoint tile once and are straight-line code (ONE), [32, 128] at 8 warps and [16, 128]
#        at 4, with the loop over a program's items pipelined 2 or 3 deep (flush_stages) or not; then
#        L = 64 over points_session14_L64.json (the two entries). Every candidate is checked against
#        the float64 recurrence before it may enter the table (tune.check_candidate);
#     2. each launch of the tuned L=16 step alone and the whole step (profile_launches --isolated).
#   CALL=2 bash results/bench/history/29_*/call_session14.sh    (on the same warm machine)
#     the tuned table from call 1 (REUSE_TUNED=1), the per-launch profile and the committed sweep.
#   CALL=3: GPU tests of the flush variants beside the state launch (pytest -m gpu -k beside).
#   CALL=4 (an H200 only; one call in all, for a session with ~600 s of device time left): the H100's
#     split entries for L = 8, 64 and the fallback replace the H200's (runs 28-29: overlap + handed
#     weights won at every L tuned there); the L=16 class is tuned on the H200 between its entry and the
#     H100's (points_session14_L64.json: the two entries); then the committed sweep with that table.
# Stage limits come from the environment (TUNE_LIMIT, TUNE64_LIMIT, ISO_LIMIT, FULL_LIMIT, PYTEST_LIMIT; 0 skips).
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
# a GPU with no table of its own starts from the H200's (tuned entries then replace their classes)
T=replayssm_kernels/configs/$(python -c 'from replayssm_kernels.configs import device_key; print(device_key("cuda"))').json
[ -e "$T" ] || cp replayssm_kernels/configs/nvidia_h200.json "$T"
if [ "${CALL:-1}" = 1 ]; then
  [ "${TUNE_LIMIT:-380}" = 0 ] || STAGES=tune TUNE_LENGTHS="16 8" TUNE_LIMIT=${TUNE_LIMIT:-380} \
    POINTS="$(cat "$HERE/points_session14.json")" OUT=$O bash scripts/gpu_session.sh
  [ "${TUNE64_LIMIT:-60}" = 0 ] || { mv "$O/tune" "$O/tune16"; rm -f "$O/tune16/tuned.json"; STAGES=tune TUNE_LENGTHS="64" \
    TUNE_LIMIT=${TUNE64_LIMIT:-60} POINTS="$(cat "$HERE/points_session14_L64.json")" OUT=$O bash scripts/gpu_session.sh; }
  [ "${ISO_LIMIT:-60}" = 0 ] || timeout "${ISO_LIMIT:-60}" python -m replayssm_kernels.profile_launches --isolated \
    --cursors steady --cache-lengths 16 --dtype-pairs float32/bfloat16 bfloat16/bfloat16 --out "$O/iso" 2>&1 | grep -v Warn
elif [ "${CALL}" = 2 ]; then
  REUSE_TUNED=1 STAGES="profile full" FULL_LIMIT=${FULL_LIMIT:-480} OUT=$O bash scripts/gpu_session.sh
elif [ "${CALL}" = 4 ]; then
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) ;; *) echo "CALL=4 is for an H200" >&2; exit 3;; esac
  python - <<'PY'
import json
h100 = json.load(open("replayssm_kernels/configs/nvidia_h100_80gb_hbm3.json"))
path = "replayssm_kernels/configs/nvidia_h200.json"
h200 = json.load(open(path))
for key, entry in h100["configs"].items():
    if key.startswith("replayssm_split/") and "LB16" not in key:
        h200["configs"][key] = entry
h200["tuned_by"] += " || replayssm_split L=8, L=64 and fallback entries: the H100's (runs 28-29), not tuned on an H200"
json.dump(h200, open(path, "w"), indent=1)
PY
  STAGES=tune TUNE_LENGTHS="16" TUNE_LIMIT=${TUNE_LIMIT:-110} POINTS="$(cat "$HERE/points_session14_L64.json")" \
    OUT=$O bash scripts/gpu_session.sh
  STAGES=full FULL_LIMIT=${FULL_LIMIT:-440} OUT=$O bash scripts/gpu_session.sh
else
  STAGES=pytest PYTEST_K="beside" PYTEST_LIMIT=${PYTEST_LIMIT:-300} OUT=$O bash scripts/gpu_session.sh
fi
rmdir "$O"/* 2>/dev/null || true  # gpu_session.sh's empty stage folders
