#!/usr/bin/env bash
# Session 12's one device call for run 27 (the device was scarce: every stage of the plan in one call).
# On the GPU machine, from the repository root, with the wheels installed and OUT set:
#   bash results/bench/history/27_*/call_session12.sh   (each stage's time limit: TUNE_LIMIT, BENCH_LIMIT,
#   PYTEST_LIMIT, SPLIT_LIMIT; 0 skips the last two) and the bench's ring lengths (BENCH_LENGTHS, default all)
# 1. tune the split design at L = 16 (its entry also serves L = 32 and the split design's untuned
#    classes) over points_session12.json (the table's L=16 entry as it is, with flush_overlap 2, with
#    flush_weights too, with launch 1 over 2 heads per program at 2 or 1 warps); 2. the headline bench (B=256, HV=32, every L, fp32 and bf16
#    state, the default design and both baselines); 3. GPU tests of the new paths; 4. the split design
#    at L = 1, 2, 4 (its "*" entry is the L=16 winner), beside the default.
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}/call1
mkdir -p "$O/bench"
# An H100 has no table of its own: it starts from the H200's (tuned entries then replace their classes).
T=replayssm_kernels/configs/$(python -c 'from replayssm_kernels.configs import device_key; print(device_key("cuda"))').json
[ -e "$T" ] || cp replayssm_kernels/configs/nvidia_h200.json "$T"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
STAGES=tune TUNE_LENGTHS=16 TUNE_LIMIT=${TUNE_LIMIT:-150} POINTS="$(cat "$HERE/points_session12.json")" OUT=$O \
  bash scripts/gpu_session.sh
bench() { timeout "$1" python -m replayssm_kernels.bench --out "$O/bench" --max-sets 16 --rep-ms 30 --batch 256 \
  --heads 32 --gqa 1 --dtype-pairs float32/bfloat16 bfloat16/bfloat16 "${@:2}" 2>&1 | grep -v Warn; }
bench "${BENCH_LIMIT:-140}" ${BENCH_LENGTHS:+--cache-lengths $BENCH_LENGTHS}
[ "${PYTEST_LIMIT:-90}" = 0 ] || STAGES=pytest PYTEST_K="beside" PYTEST_LIMIT=${PYTEST_LIMIT:-90} OUT=$O bash scripts/gpu_session.sh
[ "${SPLIT_LIMIT:-50}" = 0 ] || bench "${SPLIT_LIMIT:-50}" --append --impls replayssm_helion_split --cache-lengths 1 2 4
