#!/usr/bin/env bash
# Session 18's device call, from the repository root with the wheels installed and OUT set:
#   bash results/bench/history/33_*/call_session18.sh            (CALL=1, run first: run 33's profile)
#   CALL=2 bash results/bench/history/33_*/call_session18.sh     (after 71f5b55: flush_dot)
# CALL=1:
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
# CALL=2 (after CALL=1 showed the flush's cost per flushing row, not per launch, and at about half the
# copy rate with every row flushing): the flush's dot on TF32 tensor cores (flush_dot, 71f5b55).
#   On an H200: as CALL=1's H200 branch, with flush_dot "tf32" (with and without flush_k_stages 3)
#   among the two-launch points at L=16.
#   On any other GPU: the isolated L=16 profile of the table's entry with flush_dot ieee / tf32 /
#   tf32x3 (none, steady, all), then ../31_*/call_session16.sh CALL=1 at L = 16 and 8, both state
#   dtypes: the entry against it with flush_dot "tf32", "tf32x3", and "tf32" with flush_k_stages 2
#   (fp32: 102 registers offline against 122 with 3); apply_run31.py tables a variant that beat the
#   entry by 1% in the call (tuned.json comes back; no sweep).
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
if [ "${CALL:-1}" = 2 ]; then
  DOTS='[{"flush_dot": "tf32"}, {"flush_dot": "tf32x3"}, {"flush_dot": "tf32", "flush_k_stages": 2}]'
  case "$GPU" in
  *H200*)
    TWO_VARIANTS='[{"flush_k_stages": 3}, {"flush_dot": "tf32"}, {"flush_k_stages": 3, "flush_dot": "tf32"}]' \
      CALL=4 TUNE_LIMIT=${TUNE_LIMIT:-170} FULL_LIMIT=${FULL_LIMIT:-230} bash "$HERE"/../31_*/call_session16.sh
    ;;
  *)
    timeout "${ISO_LIMIT:-150}" python -m replayssm_kernels.profile_launches --isolated --cursors none steady all \
      --cache-lengths 16 --dtype-pairs float32/bfloat16 bfloat16/bfloat16 \
      --extra '[{}, {"flush_dot": "tf32"}, {"flush_dot": "tf32x3"}]' --out "$O/iso" 2>&1 | grep -v Warn | tail -60
    VARIANTS=$DOTS LENGTHS="16 8" CALL=1 TUNE_LIMIT=${TUNE_LIMIT:-110} FULL_LIMIT=0 \
      bash "$HERE"/../31_*/call_session16.sh
    ;;
  esac
  exit 0
fi
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
