#!/usr/bin/env bash
# Session 18's device call, from the repository root with the wheels installed and OUT set:
#   bash results/bench/history/33_*/call_session18.sh
# On an H200: run 32's H200 plan (../32_*/call_session17.sh CALL=4: the H100's entries into the H200
# table, L=16 timed for both designs, split_flush_from_l decided, then the committed sweep).
# On any other GPU: where the two-launch state launch's flush time goes (NOTES, "What to try next",
# item 1c). The isolated profile at L=16, both state dtypes (bf16 rings), times each launch alone
# under a CUDA graph with no rows flushing (none), the benchmark's staggered cursors (steady) and
# every row flushing (all), for
#   v0 the table's two-launch entry;
#   v1 the split design ("launches": 3, its own table entry): with flush_overlap its state launch
#      skips flush rows, so with no row flushing it does the same work as v0's without a flush
#      branch; v0 none against v1 none prices the branch untaken (registers, code), steady - none
#      and (all - none) / 16 the flush rows' work;
#   v2-v4 the cache hints of ../32_*/variants_cache_hints.json on v0 (the K loop's checkpoint load
#      "last" and "first", the flush's store ".cs").
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
case "$GPU" in
*H200*)
  CALL=4 TUNE_LIMIT=${TUNE_LIMIT:-115} FULL_LIMIT=${FULL_LIMIT:-240} bash "$HERE"/../32_*/call_session17.sh
  ;;
*)
  extra=$(python -c "import json, sys; print(json.dumps([{}, {'launches': 3}] + json.load(open(sys.argv[1]))))" \
    "$(echo "$HERE"/../32_*/variants_cache_hints.json)")
  timeout "${ISO_LIMIT:-520}" python -m replayssm_kernels.profile_launches --isolated --cursors none steady all \
    --cache-lengths 16 --dtype-pairs float32/bfloat16 bfloat16/bfloat16 --extra "$extra" --out "$O/iso" 2>&1 |
    grep -v Warn | tail -130
  ;;
esac
