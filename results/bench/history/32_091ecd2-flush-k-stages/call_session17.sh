#!/usr/bin/env bash
# Session 17's plans for the next device session (neither ran in session 17), from the repository root
# with the wheels installed and OUT set:
#   CALL=1 bash results/bench/history/32_*/call_session17.sh
# CALL=1 (any GPU, ~300 s): where the two-launch state launch's flush time goes (results/bench/NOTES.md,
# "What to try next", item 1c). After run 32 that launch takes 236.9 us at L=16 fp32 on an H100; the
# split step's state launch, which skips flush rows, took 185-192 (runs 28-29). The isolated profile
# times each launch of an L=16 step alone under a CUDA graph with no rows flushing (none), the
# benchmark's staggered cursors (steady) and every row flushing (all), for the table's entry and the
# variants of variants_cache_hints.json, both state dtypes:
#   - load_eviction_policies "last" on the state launch's checkpoint load in its K loop (position 8 of
#     that kernel's 18 loads at L=16 with the ring loaded once and handed weights; a CPU test checks
#     the position): does the flush's re-read of that tile miss L2?
#   - "first" there: do the streamed checkpoint reads evict launch 1's scratch and the ring?
#   - store_cache_modifiers ".cs" on the flush's checkpoint store (the second of three stores).
# Reading it: (all - none) / 16 against (steady - none) separates a per-row flush cost from a
# per-launch one (a tail of slow programs); a variant that shrinks (all - none) answers the L2 guess.
# CALL=4 (an H200 only, ~550 s): run 32's H200 plan, call_session16.sh CALL=4 with the two-launch
# entries' flush_k_stages variant (the command session 17 asked an H200 for four times).
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
CALL=${CALL:-1}
if [ "$CALL" = 1 ]; then
  extra=$(python -c "import json, sys; print(json.dumps([{}] + json.load(open(sys.argv[1]))))" "$HERE/variants_cache_hints.json")
  timeout "${ISO_LIMIT:-420}" python -m replayssm_kernels.profile_launches --isolated --cursors steady none all \
    --cache-lengths 16 --dtype-pairs float32/bfloat16 bfloat16/bfloat16 --extra "$extra" --out "$O/iso" 2>&1 |
    grep -v Warn | tail -80
elif [ "$CALL" = 4 ]; then
  TWO_VARIANTS='[{"flush_k_stages": 3}]' CALL=4 TUNE_LIMIT=${TUNE_LIMIT:-125} FULL_LIMIT=${FULL_LIMIT:-250} \
    bash "$HERE/../31_521e6d4-prep-stages/call_session16.sh"
fi
