#!/usr/bin/env bash
# The GPU runs behind results/ for one kernel revision (~10 minutes in all, more than one device
# call may run, so split it over calls with STAGES):
#
#   REPLAYSSM_GIT_SHA=$(git rev-parse HEAD) scripts/gpu_session.sh      # on the H200, OUT=<folder>
#   STAGES="pytest check" scripts/gpu_session.sh                          # some stages only
#
# 1. tune the ReplaySSM configs per ring class (TUNE_LENGTHS, default L = 16 4 1; the first also serves
#    untuned classes) over a few candidates (POINTS) (both state dtypes), merged into
#    replayssm_kernels/configs/<device>.json (other entries kept); 2. the benchmark at the headline
#    shape over every L ("small": then smaller batches); "ceiling": the read-side ceiling; 3. the
#    per-launch split (profile_launches); 4. pytest -m gpu (narrowed by PYTEST_ARGS, and PYTEST_K,
#    a -k expression); 5. gpu_check's error table; 6. "sweep": other head counts, GQA 2, K=V=64 and fp32 rings at B=256; "full": the
#    committed sweep of results/bench (the default design and both baselines), most important first.
# Each stage has a time limit so a slow one cannot starve the rest; every tool writes its CSV as it
# goes, so a stage cut short keeps what it measured. Needs torch with CUDA, helion==1.5.0 and
# fla-core==0.6.0 importable (../shared/tools/device-wheels.sh).
set -uo pipefail
OUT=${OUT:-results}
mkdir -p "$OUT/tune" "$OUT/bench" "$OUT/gpu_check" "$OUT/profile" "$OUT/ceiling"
STAGES=${STAGES:-tune bench small ceiling profile pytest check sweep full}
has() { [[ " $STAGES " == *" $1 "* ]]; }
# Tuned kind (TUNE_KIND: replayssm, replayssm_split, replayssm_fused) and its candidates (POINTS):
# [V tile, K chunk], warps, K channels per flush step (flush_block_k; fewer bound the flush branch's
# registers), and the depth of the pipelined loop over K chunks: k_stages for the two- and
# three-launch state kernels, range_num_stages[1] for the fused one. [32, 128] / 1 warp / k_stages 1
# is the state kernel before it streamed K (the whole checkpoint tile at once).
TUNE_KIND=${TUNE_KIND:-replayssm_split}
POINTS=${POINTS:-'[{"block_sizes":[32,128],"num_warps":1,"num_stages":1,"k_stages":1,"flush_block_k":32},
 {"block_sizes":[32,32],"num_warps":1,"num_stages":1,"k_stages":3,"flush_block_k":32},
 {"block_sizes":[64,32],"num_warps":2,"num_stages":1,"k_stages":3,"flush_block_k":32},
 {"block_sizes":[64,64],"num_warps":4,"num_stages":1,"k_stages":2,"flush_block_k":32},
 {"block_sizes":[128,32],"num_warps":4,"num_stages":1,"k_stages":3,"flush_block_k":32},
 {"block_sizes":[128,64],"num_warps":4,"num_stages":1,"k_stages":2,"flush_block_k":32},
 {"block_sizes":[128,32],"num_warps":8,"num_stages":1,"k_stages":3,"flush_block_k":32}]'}
TABLE=replayssm_kernels/configs/$(python -c 'from replayssm_kernels.configs import device_key; print(device_key("cuda"))').json
# A tune stage leaves its table in /tmp too, so a later call on the same (still warm) machine can
# time it before it is committed here: REUSE_TUNED=1 puts it in place (env.json's configs_sha256_16
# then matches the tree once tune/tuned.json is committed as the table).
KEPT=/tmp/replayssm_tuned_$(basename "$TABLE")
if [ "${REUSE_TUNED:-0}" = 1 ]; then
  if [ -e "$KEPT" ]; then cp "$KEPT" "$TABLE" && echo "using the table tuned earlier on this machine ($KEPT)"
  else echo "REUSE_TUNED=1 but no $KEPT (a fresh machine): stopping, commit the tuned table first" >&2; exit 3; fi
fi

if has tune; then
cp "$TABLE" "$OUT/tune/previous.json"
timeout ${TUNE_LIMIT:-200} python -m replayssm_kernels.tune --fresh --kernels "$TUNE_KIND" --cache-lengths ${TUNE_LENGTHS:-16 4 1} --points "$POINTS" \
    --rep-ms 20 --trials-csv "$OUT/tune/trials.csv" --dtype-pairs float32/bfloat16 bfloat16/bfloat16 2>&1 | grep -v Warn
cmp -s "$TABLE" "$OUT/tune/previous.json" || python - "$TABLE" "$OUT/tune/previous.json" "$TUNE_KIND" <<'PY'
import json, sys
table, previous, kind = sys.argv[1:]
new, old = json.load(open(table)), json.load(open(previous))
# the classes tuned now (and the kind's "*" fallback, from the first length) replace their entries;
# every other entry, of this kind too (a ring class tuned in an earlier run), is kept
new["configs"] = dict(sorted((old["configs"] | new["configs"]).items()))
new["tuned_by"] = f"{kind}: {new['tuned_by']} || the other entries: {old['tuned_by']}"
json.dump(new, open(table, "w"), indent=1)
PY
rm -f "$OUT/tune/previous.json"
cp "$TABLE" "$OUT/tune/tuned.json"
cp "$TABLE" "$KEPT"
fi

bench() { timeout "$1" python -m replayssm_kernels.bench --out "$OUT/bench" --max-sets 16 --rep-ms "${BENCH_REP_MS:-50}" "${@:2}" 2>&1 | grep -v Warn | tail -40; }
if has bench; then
bench "${BENCH_LIMIT:-170}" --batch 256 --heads 32 --gqa 1 --cache-lengths ${BENCH_LENGTHS:-1 2 4 8 16 32 64} \
    --dtype-pairs float32/bfloat16 bfloat16/bfloat16 ${BENCH_ARGS:-}
fi
has small && bench 80 --append --batch 64 8 1 --heads 32 --gqa 1 --cache-lengths 4 16 --dtype-pairs float32/bfloat16
# the read-side ceiling: a gathered state pool through two mat-vecs, full tiles vs pipelined chunks
has ceiling && timeout 100 python -m replayssm_kernels.matvec_ceiling --out "$OUT/ceiling" 2>&1 | grep -v Warn

has profile && timeout 90 python -m replayssm_kernels.profile_launches --out "$OUT/profile" 2>&1 | grep -v Warn | tail -12

has pytest && timeout "${PYTEST_LIMIT:-200}" python -m pytest -m gpu -q -p no:cacheprovider ${PYTEST_ARGS:-} ${PYTEST_K:+-k "$PYTEST_K"} 2>&1 | tee "$OUT/gpu_check/pytest_gpu.log" | tail -4
if has check; then  # (stage order below: check, then sweep)
timeout "${CHECK_LIMIT:-120}" python -m replayssm_kernels.gpu_check --out "$OUT/gpu_check" ${CHECK_ARGS:---heads 32 --gqa 2} 2>&1 | tail -12
rm -f "$OUT/gpu_check/worst_errors.csv"  # derived from kernel_errors.csv; the device call returns 8 files at most
fi

# beyond the headline: other head counts and GQA 2 at B=256, the K=V=64 point, fp32 rings
if has sweep; then
BENCH_REP_MS=30 bench "${SWEEP_LIMIT:-120}" --append --batch 256 --heads 8 16 64 --gqa 1 2 --cache-lengths 16 --dtype-pairs float32/bfloat16
BENCH_REP_MS=30 bench 60 --append --batch 256 --heads 32 --gqa 2 --dims 64 128 --cache-lengths 16 --dtype-pairs float32/float32 bfloat16/bfloat16
fi

# the committed sweep: one process over replayssm_kernels/sweeps/full.json (the headline shape over
# every L and dtype pair, then smaller batches, other head counts and GQA 2, bf16 state, K=V=64),
# the default design and both baselines; compiled kernels are shared across its cases
has full && BENCH_REP_MS=30 bench "${FULL_LIMIT:-540}" --plan replayssm_kernels/sweeps/full.json
