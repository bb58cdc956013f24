#!/usr/bin/env bash
# Session 19's device call, from the repository root with the wheels installed and OUT set:
#   bash results/bench/history/34_*/call_session19.sh
# On an H200: run 32's H200 plan, unchanged (../32_*/call_session17.sh CALL=4: the H100's entries into
# the H200 table, L=16 timed for both designs, split_flush_from_l decided, then the committed sweep).
# On any other GPU: Nsight Compute on the two-launch state launch at L=16 with no, steady and all rows
# flushing (../33_*/call_ncu.sh), the diagnosis run 33 left for the flush's cost.
set -uo pipefail
HERE=$(dirname "$0")
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
*H200*) CALL=4 TUNE_LIMIT=${TUNE_LIMIT:-110} FULL_LIMIT=${FULL_LIMIT:-250} bash "$HERE"/../32_*/call_session17.sh ;;
*) timeout "${NCU_LIMIT:-540}" bash "$HERE"/../33_*/call_ncu.sh ;;
esac
