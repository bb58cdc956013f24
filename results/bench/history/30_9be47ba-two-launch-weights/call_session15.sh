#!/usr/bin/env bash
# Session 15's device calls (run 30), from the repository root with the wheels installed and OUT set:
#   CALL=1 bash results/bench/history/30_*/call_session15.sh   (below; CALL=2, 3 and 5 at the end)
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
entry() {  # the table's entry for L, state dtype (and kind: replayssm_split unless given): a one-point --points list
  python -c "import json,sys; from replayssm_kernels.kda_decode import ring_block
t = json.load(open('$T'))['configs']; kind = sys.argv[3]; k = f'{kind}/{sys.argv[2]}/K128-V128-LB{ring_block(int(sys.argv[1]))}'
print(json.dumps([t.get(k, t[kind + '/' + sys.argv[2] + '/*'])]))" "$1" "$2" "${3:-replayssm_split}"
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
if [ "${CALL:-1}" = 1 ]; then
  for L in 16 8 64; do
    for sd in float32 bfloat16; do tune replayssm_split "$L" "$sd/bfloat16" "$(entry "$L" "$sd")" "split_L${L}_$sd"; done
    P="$HERE/points_two_launch.json"; [ "$L" = 64 ] && P="$HERE/points_L64.json"
    tune replayssm "$L" "float32/bfloat16 bfloat16/bfloat16" "$(cat "$P")" "two_L$L"
  done
  cp "$T" "$O/tuned.json"
elif [ "$CALL" = 2 ]; then
  # An H200 only, one call (~600 s): the H100's entries (runs 28-30) for the split classes other than
  # L=16 and for the two-launch L = 8 and 16 go into the H200's table; at L=16 the H200 times its split
  # entry and the H100's, and the two-launch walk and handed weights; apply_run30.py then tables the
  # fastest two-launch config and moves split_flush_from_l to 32 if two launches won; the committed
  # sweep runs with that table (FULL_LIMIT=0: no sweep, for a call with less device time).
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) ;; *) echo "CALL=2 is for an H200" >&2; exit 3;; esac
  python - <<'PY'
import json
h100 = json.load(open("replayssm_kernels/configs/nvidia_h100_80gb_hbm3.json"))["configs"]
path = "replayssm_kernels/configs/nvidia_h200.json"
h200 = json.load(open(path))
keys = [k for k in h100 if k.startswith("replayssm_split/") and "LB16" not in k]
keys += [k for k in h100 if k.startswith("replayssm/") and ("LB8" in k or "LB16" in k)]
h200["configs"].update({k: h100[k] for k in keys})
h200["tuned_by"] += " || " + ", ".join(keys) + ": the H100's (runs 28-30), not tuned on an H200"
json.dump(h200, open(path, "w"), indent=1)
PY
  for sd in float32 bfloat16; do
    both=$(python -c "import json; a = json.loads('$(entry 16 "$sd")'); b = json.load(open('replayssm_kernels/configs/nvidia_h100_80gb_hbm3.json'))['configs']['replayssm_split/$sd/K128-V128-LB16']; print(json.dumps(a + [b]))")
    TUNE_LIMIT=${SPLIT_LIMIT:-60} tune replayssm_split 16 "$sd/bfloat16" "$both" "split_L16_$sd"
  done
  TUNE_LIMIT=${TWO_LIMIT:-90} tune replayssm 16 "float32/bfloat16 bfloat16/bfloat16" "$(head -2 "$HERE/points_two_launch.json" | sed '1s/$//; 2s/,$/]/')" two_L16
  python "$HERE/apply_run30.py" "$T" "$O/trials.csv"
  cp "$T" "$O/tuned.json"
  [ "${FULL_LIMIT:-400}" = 0 ] || STAGES=full FULL_LIMIT=${FULL_LIMIT:-400} OUT=$O bash scripts/gpu_session.sh
elif [ "$CALL" = 5 ]; then
  # Next (not run in session 15; any GPU): the two-launch flush with handed weights at the other ring
  # lengths, beside the table's entries: L = 4 (two launches already: its walk entry), and L = 32, 64
  # (split: its entry). Offline (inspect_codegen, [64, 32], 2 warps, flush_block_k 16): 95 registers at
  # L=4 (the walk 136), 123 at L = 32 and 64. Tables nothing by itself: trials.csv and tuned.json
  # come back; moving split_flush_from_l past 32 needs a rule like apply_run30.py's.
  HW=$(sed -n 2p "$HERE/points_two_launch.json" | sed 's/^/[/; s/,$/]/')
  for L in 4 32 64; do
    for sd in float32 bfloat16; do
      if [ "$L" = 4 ]; then base=$(entry "$L" "$sd" replayssm); kind=replayssm; else base=$(entry "$L" "$sd"); kind=replayssm_split; fi
      tune "$kind" "$L" "$sd/bfloat16" "$base" "entry_L${L}_$sd"
      tune replayssm "$L" "$sd/bfloat16" "$HW" "two_L${L}_$sd"
    done
  done
  cp "$T" "$O/tuned.json"
else
  # The committed sweep with this GPU's table (the default design as the table says), then the GPU
  # tests of the two-launch flush with handed weights.
  STAGES=full FULL_LIMIT=${FULL_LIMIT:-400} OUT=$O bash scripts/gpu_session.sh
  STAGES=pytest PYTEST_K="two_launch_flushes and not fk32" PYTEST_LIMIT=${PYTEST_LIMIT:-100} OUT=$O bash scripts/gpu_session.sh
fi
rmdir "$O"/* 2>/dev/null || true  # gpu_session.sh's empty stage folders
