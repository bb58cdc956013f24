#!/usr/bin/env bash
# Session 15's device call (run 30), from the repository root with the wheels installed and OUT set:
#   bash results/bench/history/30_*/call_session15.sh
# The two-launch step with the flush rows' checkpoint write back in the state launch, now with launch
# 1's ring weights (flush_weights: a ring tile is two loads and a dot; flush_block_k 16 keeps the state
# launch at 96 registers offline), against the split step's committed entry, side by side, per L:
#   L = 16, then 8: the split entry of this GPU's table (tune --kernels replayssm_split, one point: the
#   table's entry for that class and dtype), then the two-launch points of points_two_launch.json
#   (the table's two-launch walk, three handed-weights points); L = 64: the split entry and
#   points_L64.json. Both state dtypes, bf16 rings. Every candidate is checked against the float64
#   recurrence first (tune.check_candidate). The tuned table (both kinds' winners) comes back as
#   tuned.json; nothing changes which design launches=None runs.
# Stage limits from the environment: TUNE_LIMIT (per tune command, seconds). Back: trials.csv (every
# trial, with the part it came from), env.json (the first tune command's) and tuned.json.
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
T=replayssm_kernels/configs/$(python -c 'from replayssm_kernels.configs import device_key; print(device_key("cuda"))').json
[ -e "$T" ] || cp replayssm_kernels/configs/nvidia_h200.json "$T"
entry() {  # the split table's entry for L, state dtype: a one-point --points list
  python -c "import json,sys; from replayssm_kernels.kda_decode import ring_block
t = json.load(open('$T'))['configs']; k = f'replayssm_split/{sys.argv[2]}/K128-V128-LB{ring_block(int(sys.argv[1]))}'
print(json.dumps([t.get(k, t['replayssm_split/' + sys.argv[2] + '/*'])]))" "$1" "$2"
}
PARTS=/tmp/parts; mkdir -p $PARTS
tune() {  # kind, L, dtype pair(s), points, part name; then every part so far as one trials.csv (and env.json)
  timeout "${TUNE_LIMIT:-150}" python -m replayssm_kernels.tune --kernels "$1" --cache-lengths "$2" --dtype-pairs $3 \
    --points "$4" --rep-ms 20 --trials-csv "$PARTS/$5.csv" 2>&1 | grep -v Warn
  python -c "import glob, os, pandas as pd
parts = sorted(glob.glob('$PARTS/*.csv'), key=os.path.getmtime)
pd.concat([pd.read_csv(p).assign(part=os.path.basename(p)[:-4]) for p in parts]).to_csv('$O/trials.csv', index=False)"
  [ -e "$O/env.json" ] || cp "$PARTS/env.json" "$O/env.json"
}
for L in 16 8 64; do
  for sd in float32 bfloat16; do tune replayssm_split "$L" "$sd/bfloat16" "$(entry "$L" "$sd")" "split_L${L}_$sd"; done
  P="$HERE/points_two_launch.json"; [ "$L" = 64 ] && P="$HERE/points_L64.json"
  tune replayssm "$L" "float32/bfloat16 bfloat16/bfloat16" "$(cat "$P")" "two_L$L"
done
cp "$T" "$O/tuned.json"
