#!/usr/bin/env bash
# The GPU runs behind results/ for one kernel revision, in one go (a device session allows ~10 minutes):
#
#   scripts/gpu_session.sh
#
# 1. re-tune the configs (a few candidates, L=16), 2. the benchmark sweep, 3. pytest -m gpu,
# 4. gpu_check's error table. Each stage has a time limit so a slow one cannot starve the rest; every
# tool writes its CSV incrementally, so a stage cut short keeps what it measured (env.json says so).
# Outputs go under $OUT (default: results/); tuned configs to replayssm_kernels/configs/<device>.json
# and a copy in $OUT/tune/. Needs torch with CUDA, helion==1.5.0 and fla-core==0.6.0 importable.
set -uo pipefail
OUT=${OUT:-results}
mkdir -p "$OUT/tune" "$OUT/bench" "$OUT/gpu_check"

# Candidates for the ReplaySSM kernel (the standard kernel is timed on their V tiles / warps).
POINTS='[
 {"block_sizes": [16], "num_warps": 1, "num_stages": 1, "ring_chunk": 8},
 {"block_sizes": [16], "num_warps": 1, "num_stages": 1, "ring_chunk": 1, "range_unroll_factors": [0, 4, 0, 0]},
 {"block_sizes": [32], "num_warps": 1, "num_stages": 1, "ring_chunk": 1, "range_unroll_factors": [0, 4, 0, 0]},
 {"block_sizes": [128], "num_warps": 4, "num_stages": 1, "ring_chunk": 1, "range_unroll_factors": [0, 4, 0, 0]}
]'

stage() {  # stage SECONDS command...: run with a time limit, say how it ended
    local limit=$1
    shift
    echo "=== $* (limit ${limit}s)"
    timeout "$limit" "$@"
    echo "=== exit $?"
}
bench() { stage "$1" python -m replayssm_kernels.bench --out "$OUT/bench" --max-sets 16 --rep-ms 100 "${@:2}"; }

stage 100 python -m replayssm_kernels.tune --fresh --cache-lengths 16 --points "$POINTS" \
    --trials-csv "$OUT/tune/trials.csv" --rep-ms 40
cp replayssm_kernels/configs/*.json "$OUT/tune/"

# The headline shape over every cache length, then one axis at a time around it.
bench 90 --batch 256 --heads 32 --gqa 1 --cache-lengths 1 2 4 8 16 32 64 \
    --dtype-pairs float32/bfloat16 bfloat16/bfloat16
bench 40 --append --batch 64 8 1 --heads 32 --gqa 1 --cache-lengths 8 16 --dtype-pairs float32/bfloat16
bench 30 --append --batch 256 --heads 8 64 --gqa 1 --cache-lengths 8 16 --dtype-pairs float32/bfloat16
bench 20 --append --batch 256 --heads 32 --gqa 2 --cache-lengths 8 16 --dtype-pairs float32/bfloat16
bench 20 --append --batch 256 --heads 32 --gqa 1 --cache-lengths 8 16 --dtype-pairs float32/float32
bench 20 --append --batch 256 --heads 32 --gqa 1 --dims 64 --cache-lengths 8 16 --dtype-pairs float32/bfloat16

stage 160 python -m pytest -m gpu -q -x -p no:cacheprovider 2>&1 | tee "$OUT/gpu_check/pytest_gpu.log" | tail -4
stage "${CHECK_LIMIT:-100}" python -m replayssm_kernels.gpu_check --out "$OUT/gpu_check" --heads 4 32
