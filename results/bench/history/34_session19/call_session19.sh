#!/usr/bin/env bash
# Session 19's device calls, from the repository root with the wheels installed and OUT set:
#   bash results/bench/history/34_*/call_session19.sh            (CALL=1)
#   CALL=2 bash results/bench/history/34_*/call_session19.sh     (after the kernel option flush_keep)
# CALL=1:
# On an H200: run 32's H200 plan, unchanged (../32_*/call_session17.sh CALL=4: the H100's entries into
# the H200 table, L=16 timed for both designs, split_flush_from_l decided, then the committed sweep).
# On any other GPU: Nsight Compute on the two-launch state launch at L=16 with no, steady and all rows
# flushing (../33_*/call_ncu.sh), the diagnosis run 33 left for the flush's cost.
# CALL=2 (after CALL=1 found the flush's re-read of its checkpoint tile going to DRAM): flush_keep, the
# K loop in two copies with L2 hints (flush rows' chunks evict_last, the others' evict_first).
#   On an H200: as CALL=1's H200 branch, with flush_keep among the two-launch points at L=16.
#   On any other GPU: (with ISO=1, first: the isolated L=16 profile of the table's entry with and without
#   flush_keep, none, steady, all, both state dtypes) Nsight Compute on its steady state launch with
#   flush_keep (DRAM bytes, against call 2's without), then
#   ../31_*/call_session16.sh CALL=1 at L = 16 and 8, both state dtypes: the entry against it with
#   flush_keep; apply_run31.py tables it where it beat the entry by 1% in the call (tuned.json comes
#   back; no sweep).
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
if [ "${CALL:-1}" = 2 ]; then
  case "$GPU" in
  *H200*)
    nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
    TWO_VARIANTS='[{"flush_k_stages": 3}, {"flush_keep": 1}, {"flush_k_stages": 3, "flush_keep": 1}]' \
      CALL=4 TUNE_LIMIT=${TUNE_LIMIT:-110} FULL_LIMIT=${FULL_LIMIT:-240} bash "$HERE"/../31_*/call_session16.sh
    ;;
  *)
    [ "${ISO:-0}" = 0 ] || timeout "${ISO_LIMIT:-150}" python -m replayssm_kernels.profile_launches --isolated \
      --cursors none steady all --cache-lengths 16 --dtype-pairs float32/bfloat16 bfloat16/bfloat16 \
      --extra '[{}, {"flush_keep": 1}]' --out "$O/iso" 2>&1 | grep -v Warn | tail -40
    EXTRA='{"flush_keep": 1}' MODES=steady OUT="$O/ncu_keep" timeout 150 bash "$HERE"/../33_*/call_ncu.sh 2>&1 |
      grep -v '(16384, 1, 1)'
    VARIANTS='[{"flush_keep": 1}]' LENGTHS="${LENGTHS:-16 8}" CALL=1 TUNE_LIMIT=${TUNE_LIMIT:-70} FULL_LIMIT=0 \
      bash "$HERE"/../31_*/call_session16.sh
    ;;
  esac
  exit 0
fi
case "$GPU" in
*H200*) CALL=4 TUNE_LIMIT=${TUNE_LIMIT:-110} FULL_LIMIT=${FULL_LIMIT:-250} bash "$HERE"/../32_*/call_session17.sh ;;
*) timeout "${NCU_LIMIT:-540}" bash "$HERE"/../33_*/call_ncu.sh ;;
esac
