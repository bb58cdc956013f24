#!/usr/bin/env bash
# The GPU runs behind results/ for one kernel revision, in the order they were made:
#
#   scripts/gpu_session.sh tune-bench   # re-tune configs, then the benchmark sweep     (~7 min on an H200)
#   scripts/gpu_session.sh check        # pytest -m gpu, then gpu_check's error table   (~5 min)
#
# Outputs go under $OUT (default: results/), tuned configs to replayssm_kernels/configs/<device>.json
# (and a copy in $OUT/tune/). Needs torch with CUDA, helion==1.5.0 and fla-core==0.6.0 importable.
set -uo pipefail
OUT=${OUT:-results}
mkdir -p "$OUT/tune" "$OUT/bench" "$OUT/gpu_check"

# Candidates for the ReplaySSM kernel (the standard kernel is timed on their V tiles / warps).
POINTS='[
 {"block_sizes": [16], "num_warps": 1, "num_stages": 1, "ring_chunk": 8},
 {"block_sizes": [16], "num_warps": 1, "num_stages": 1, "ring_chunk": 1, "range_unroll_factors": [0, 4, 0, 0]},
 {"block_sizes": [32], "num_warps": 1, "num_stages": 1, "ring_chunk": 4},
 {"block_sizes": [32], "num_warps": 1, "num_stages": 1, "ring_chunk": 1, "range_unroll_factors": [0, 4, 0, 0]},
 {"block_sizes": [64], "num_warps": 2, "num_stages": 1, "ring_chunk": 1, "range_unroll_factors": [0, 4, 0, 0]},
 {"block_sizes": [128], "num_warps": 4, "num_stages": 1, "ring_chunk": 1, "range_unroll_factors": [0, 4, 0, 0]}
]'

bench() { python -m replayssm_kernels.bench --out "$OUT/bench" --max-sets 16 --rep-ms 100 "$@"; }

case "${1:-}" in
tune-bench)
    python -m replayssm_kernels.tune --fresh --cache-lengths 8 16 --points "$POINTS" \
        --trials-csv "$OUT/tune/trials.csv" --rep-ms 40
    cp replayssm_kernels/configs/*.json "$OUT/tune/"
    # The headline shape over every batch and cache length, then one axis at a time around it.
    bench --batch 256 64 8 1 --heads 32 --gqa 1 --cache-lengths 1 2 4 8 16 32 64 \
        --dtype-pairs float32/bfloat16 bfloat16/bfloat16
    bench --append --batch 256 --heads 8 16 64 --gqa 1 --cache-lengths 4 8 16 --dtype-pairs float32/bfloat16
    bench --append --batch 256 --heads 32 --gqa 2 --cache-lengths 4 8 16 --dtype-pairs float32/bfloat16
    bench --append --batch 256 --heads 32 --gqa 1 --cache-lengths 4 8 16 --dtype-pairs float32/float32
    bench --append --batch 256 --heads 32 --gqa 1 --dims 64 --cache-lengths 4 8 16 --dtype-pairs float32/bfloat16
    ;;
check)
    python -m pytest -m gpu -q -x 2>&1 | tee "$OUT/gpu_check/pytest_gpu.log" | tail -5
    python -m replayssm_kernels.gpu_check --out "$OUT/gpu_check" "${@:2}"
    ;;
*)
    echo "usage: $0 tune-bench | check [gpu_check args]" >&2
    exit 2
    ;;
esac
