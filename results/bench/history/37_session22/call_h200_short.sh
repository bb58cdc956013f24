#!/usr/bin/env bash
# A short H200 call for what is left of a session's device time (~200 s), from the repository root with
# the wheels installed and OUT set:  bash results/bench/history/37_*/call_h200_short.sh
# NOTES item 0 in one bench run, without tuning: the H100's two-launch L=16 entries (runs 30-32) copied
# into the H200 table on the machine only (not committed), then at B=256, HV=32, K=V=128, L=16, both
# state dtypes (bf16 rings), side by side: the H200's default design at L=16 (the split step, run 26's
# entries), the two-launch step with the H100's entries, our standard decode and FLA. Every row is
# timed by the committed bench (CUDA graphs, steady cursors, copy ceiling in the same run).
set -uo pipefail
O=${OUT:-/tmp/out}
mkdir -p "$O"
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) ;; *) echo "this call is for an H200" >&2; exit 3 ;; esac
python - <<'PY'
import json
h100 = json.load(open("replayssm_kernels/configs/nvidia_h100_80gb_hbm3.json"))["configs"]
path = "replayssm_kernels/configs/nvidia_h200.json"
h200 = json.load(open(path))
keys = [f"replayssm/{sd}/K128-V128-LB16" for sd in ("float32", "bfloat16")]
h200["configs"].update({k: h100[k] for k in keys})
h200["tuned_by"] += " || " + ", ".join(keys) + ": the H100's (runs 30-32), not tuned on an H200"
json.dump(h200, open(path, "w"), indent=1)
PY
cp replayssm_kernels/configs/nvidia_h200.json "$O/table_used.json"
timeout "${BENCH_LIMIT:-200}" python -m replayssm_kernels.bench --impls replayssm_helion_split \
  replayssm_helion_two_launch standard_helion fla_fused_recurrent --batch 256 --heads 32 --gqa 1 \
  --cache-lengths 16 --dtype-pairs float32/bfloat16 bfloat16/bfloat16 --rep-ms 100 --out "$O/bench" 2>&1 |
  grep -v Warn | tail -12
git checkout -q replayssm_kernels/configs/nvidia_h200.json
