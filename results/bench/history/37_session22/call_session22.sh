#!/usr/bin/env bash
# Session 22's device call (run 37), from the repository root with the wheels installed and OUT set:
#   CALL=1 bash results/bench/history/37_*/call_session22.sh
# On an H200: run 34's H200 plan unchanged (as runs 35-36's CALL=1; tune's trials now carry the device's
# register columns). On any other GPU, why run 36's persistent grid was slower (NOTES 1c (i)), from the
# device's own compile: tune now records each launch's registers, local memory (spills), shared memory
# and programs_per_sm (inspect_codegen.device_resources) beside its time. At L in LENGTHS (default 16),
# per state dtype (bf16 rings), the table's entry (flat grid) against it on a persistent_interleaved
# grid of M programs per SM for each token of MULTS_FLOAT32 / MULTS_BFLOAT16: "M" uncapped, "M/R" under
# maxnreg R. Defaults: fp32 "8/128 6 4" (run 36's point, then the residency its 157 uncapped registers
# allow offline, then half), bf16 "10/96 8 6". Every point checked against float64 first
# (tune.check_candidate). ../31_*/apply_run31.py tables a point only where it beat the entry by 1%.
# Then the GPU tests of the persistent grid and of the register readout (gpu_check/).
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$GPU" in
*H200*) CALL=2 bash "$HERE"/../34_*/call_session19.sh ;;
*)
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
  T=replayssm_kernels/configs/$(python -c 'from replayssm_kernels.configs import device_key; print(device_key("cuda"))').json
  cp "$T" /tmp/table_before.json
  PARTS=$(mktemp -d)
  for L in ${LENGTHS:-16}; do
    for sd in float32 bfloat16; do
      points=$(python - "$L" "$sd" <<'PY'
import json, os, sys
from replayssm_kernels.configs import device_key, lookup
from replayssm_kernels.kda_decode import LAUNCH_KINDS, default_launches, ring_block
L, sd = int(sys.argv[1]), sys.argv[2]
assert LAUNCH_KINDS[default_launches(L, "cuda")] == "replayssm", "this GPU's table runs another design here"
entry, _ = lookup("replayssm", device_key("cuda"), sd, f"K128-V128-LB{ring_block(L)}")
tokens = os.environ.get(f"MULTS_{sd.upper()}", "8/128 6 4" if sd == "float32" else "10/96 8 6").split()
points = [entry]
for token in tokens:
    mult, _, cap = token.partition("/")
    point = entry | {"pid_type": "persistent_interleaved", "num_sm_multiplier": int(mult)}
    points.append(point | ({"maxnreg": int(cap)} if cap else {}))
print(json.dumps(points))
PY
)
      timeout "${TUNE_LIMIT:-150}" python -m replayssm_kernels.tune --kernels replayssm --cache-lengths "$L" \
        --dtype-pairs "$sd/bfloat16" --points "$points" --rep-ms 20 --trials-csv "$PARTS/L${L}_$sd.csv" 2>&1 |
        grep -v Warn
      python -c "import glob, os, pandas as pd
parts = sorted(glob.glob('$PARTS/*.csv'), key=os.path.getmtime)
pd.concat([pd.read_csv(p).assign(part=os.path.basename(p)[:-4]) for p in parts]).to_csv('$O/trials.csv', index=False)"
      [ -e "$O/env.json" ] || cp "$PARTS/env.json" "$O/env.json"
    done
  done
  cp /tmp/table_before.json "$T"
  python "$HERE"/../31_*/apply_run31.py "$T" "$O/trials.csv"
  cp "$T" "$O/tuned.json"
  mkdir -p "$O/gpu_check"
  timeout "${TEST_LIMIT:-120}" python -m pytest -m gpu -q -p no:cacheprovider -k "persistent or device_resources" \
    tests/test_kernels_gpu.py 2>&1 | grep -v Warn | tail -15 | tee "$O/gpu_check/console.txt"
  ;;
esac
