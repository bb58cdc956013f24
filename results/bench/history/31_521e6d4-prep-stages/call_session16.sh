#!/usr/bin/env bash
# Session 16's device calls (run 31), from the repository root with the wheels installed and OUT set:
#   CALL=1 bash results/bench/history/31_*/call_session16.sh
# CALL=1 (any GPU): launch 1 with its loop over ring chunks software-pipelined (prep_stages; offline
# SASS shows the unpipelined walk pays one memory round trip per live ring position, because each
# position's stores come before the next one's loads). For L = 16, 8, 64, 32 and each state dtype
# (bf16 rings), the entry launches=None runs on this GPU (the table's, for the design its
# split_flush_from_l picks) is timed beside the same entry with the prep_stages / ring_chunk variants
# of variants_prep_stages.json;
# every candidate is checked against the float64 recurrence first (tune.check_candidate).
# apply_run31.py then tables a variant only where it beat the entry by at least 1% in this call;
# tuned.json comes back. FULL_LIMIT > 0 then runs the committed sweep with that table (0: none).
# CALL=3 (next, not run in session 16; any GPU): the same loop with state-launch tile variants of each
# entry (variants_state_tiles.json): offline sm_90 (inspect_codegen --kernel state, L=16, handed weights,
# flush_block_k 16, k_stages 3) [64, 32] at 2 warps, the H100 entry, holds 96 registers and 17 KB of
# shared memory; [128, 32] at 4 warps 96 and 33 KB, [64, 64] at 4 warps 96 and 34 KB, [128, 32] at 8
# warps 80 and 33 KB, all without spills; run 30 timed only [64, 32] / 2 and [32, 32] / 1 for this
# design.
# CALL=4 (next, an H200 only): see below.
# Stage limits: TUNE_LIMIT (per tune command, seconds). Back: trials.csv (every trial, with the part
# it came from), env.json (the first tune command's), tuned.json and, with a sweep, bench/.
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
T=replayssm_kernels/configs/$(python -c 'from replayssm_kernels.configs import device_key; print(device_key("cuda"))').json
[ -e "$T" ] || cp replayssm_kernels/configs/nvidia_h200.json "$T"
cp "$T" /tmp/table_before.json
PARTS=$(mktemp -d)  # this call's parts only (a warm machine keeps an earlier call's /tmp)
collect() {  # every tune part so far as one trials.csv (a part column naming each), and the first env.json
  python -c "import glob, os, pandas as pd
parts = sorted(glob.glob('$PARTS/*.csv'), key=os.path.getmtime)
pd.concat([pd.read_csv(p).assign(part=os.path.basename(p)[:-4]) for p in parts]).to_csv('$O/trials.csv', index=False)"
  [ -e "$O/env.json" ] || cp "$PARTS/env.json" "$O/env.json"
}
# the variants merged into each entry (JSON lists of option dicts; VARIANTS in the environment overrides)
CALL=${CALL:-1}
if [ "$CALL" = 3 ]; then V=variants_state_tiles.json; else V=variants_prep_stages.json; fi
VARIANTS=${VARIANTS:-$(cat "$HERE/$V")}
export VARIANTS
if [ "$CALL" = 1 ] || [ "$CALL" = 3 ]; then
  for L in ${LENGTHS:-16 8 64 32}; do
    for sd in float32 bfloat16; do
      # kind, then the points: the entry first, then its variants (VARIANTS: JSON list of option dicts)
      read -r kind points < <(python - "$L" "$sd" <<'PY'
import json, os, sys
from replayssm_kernels.configs import device_key, lookup
from replayssm_kernels.kda_decode import LAUNCH_KINDS, default_launches, ring_block
L, sd = int(sys.argv[1]), sys.argv[2]
kind = LAUNCH_KINDS[default_launches(L, "cuda")]
entry, _ = lookup(kind, device_key("cuda"), sd, f"K128-V128-LB{ring_block(L)}")
variants = json.loads(os.environ["VARIANTS"])
print(kind, json.dumps([entry] + [entry | v for v in variants]))
PY
)
      timeout "${TUNE_LIMIT:-75}" python -m replayssm_kernels.tune --kernels "$kind" --cache-lengths "$L" \
        --dtype-pairs "$sd/bfloat16" --points "$points" --rep-ms 20 --trials-csv "$PARTS/L${L}_$sd.csv" 2>&1 | grep -v Warn
      collect
    done
  done
  cp /tmp/table_before.json "$T"
  python "$HERE/apply_run31.py" "$T" "$O/trials.csv"
  cp "$T" "$O/tuned.json"
  [ "${FULL_LIMIT:-0}" = 0 ] || STAGES=full FULL_LIMIT=$FULL_LIMIT OUT=$O bash scripts/gpu_session.sh
elif [ "$CALL" = 4 ]; then
  # CALL=4 (next, not run in session 16): an H200 only, one call (~550 s). It supersedes
  # call_session15.sh CALL=2, whose L=16 points predate prep_stages. The H100's entries (runs 28-31,
  # prep_stages included) for the split classes other than L=16 and for the two-launch L = 8 and 16
  # go into the H200's table; at L=16 the H200 times its split entry with and without prep_stages
  # (4, ring_chunk 2), the H100's split entry (flush_overlap, handed weights) with it, and the
  # H100's two-launch entry; the tuner tables the faster split point, and
  # ../30_*/apply_run30.py moves split_flush_from_l to 32 if two launches won for both dtypes (L=8
  # then runs the H100's two-launch entry, not timed on the H200: it won there by more than at
  # L=16); then the committed sweep (FULL_LIMIT, 0: none).
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) ;; *) echo "CALL=4 is for an H200" >&2; exit 3;; esac
  python - <<'PY'
import json
h100 = json.load(open("replayssm_kernels/configs/nvidia_h100_80gb_hbm3.json"))["configs"]
path = "replayssm_kernels/configs/nvidia_h200.json"
h200 = json.load(open(path))
keys = [k for k in h100 if k.startswith("replayssm_split/") and "LB16" not in k]
keys += [k for k in h100 if k.startswith("replayssm/") and ("LB8" in k or "LB16" in k)]
h200["configs"].update({k: h100[k] for k in keys})
h200["tuned_by"] += " || " + ", ".join(keys) + ": the H100's (runs 28-31), not tuned on an H200"
json.dump(h200, open(path, "w"), indent=1)
PY
  cp "$T" /tmp/table_before.json
  tune16() {  # kind, dtype pair(s), points, part
    timeout "${TUNE_LIMIT:-75}" python -m replayssm_kernels.tune --kernels "$1" --cache-lengths 16 --dtype-pairs $2 \
      --points "$3" --rep-ms 20 --trials-csv "$PARTS/$4.csv" 2>&1 | grep -v Warn
    collect
  }
  for sd in float32 bfloat16; do
    split=$(python -c "import json; key, ps = 'replayssm_split/$sd/K128-V128-LB16', {'prep_stages': 4, 'ring_chunk': 2}
e, h = json.load(open('$T'))['configs'][key], json.load(open('replayssm_kernels/configs/nvidia_h100_80gb_hbm3.json'))['configs'][key]
print(json.dumps([e, e | ps, h | ps]))")
    tune16 replayssm_split "$sd/bfloat16" "$split" "split_L16_$sd"
  done
  # (TWO_VARIANTS, added in session 17: a JSON list of options each merged into those entries too)
  two=$(python -c "import json, os; t = json.load(open('$T'))['configs']
points = [t[f'replayssm/{sd}/K128-V128-LB16'] for sd in ('float32', 'bfloat16')]
points += [p | v for p in points for v in json.loads(os.environ.get('TWO_VARIANTS', '[]'))]
print(json.dumps([p for i, p in enumerate(points) if p not in points[:i]]))")
  tune16 replayssm "float32/bfloat16 bfloat16/bfloat16" "$two" two_L16
  python "$HERE/../30_9be47ba-two-launch-weights/apply_run30.py" "$T" "$O/trials.csv"
  cp "$T" "$O/tuned.json"
  [ "${FULL_LIMIT:-380}" = 0 ] || STAGES=full FULL_LIMIT=${FULL_LIMIT:-380} OUT=$O bash scripts/gpu_session.sh
else
  # CALL=2: the committed sweep with this GPU's (committed) table, then the per-launch profile.
  STAGES=full FULL_LIMIT=${FULL_LIMIT:-400} OUT=$O bash scripts/gpu_session.sh
  STAGES=profile OUT=$O bash scripts/gpu_session.sh
fi
rmdir "$O"/* 2>/dev/null || true  # gpu_session.sh's empty stage folders
