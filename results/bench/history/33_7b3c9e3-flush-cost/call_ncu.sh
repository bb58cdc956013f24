#!/usr/bin/env bash
# Run 33, call 3 (any GPU): Nsight Compute on the two-launch state launch at L=16 with no, steady and
# all rows flushing (ncu_state.py), both state dtypes: DRAM bytes and throughput, L2 hit rate,
# occupancy and warp stall reasons, to find where the flush's time goes. Without ncu on the machine:
# the isolated profile (none, all) of fp32 flush shapes instead. DTYPES and MODES (in the environment)
# narrow the ncu runs; EXTRA (a JSON dict of kernel options) is merged into the profiled entry.
set -uo pipefail
HERE=$(dirname "$0")
O=${OUT:-/tmp/out}
mkdir -p "$O"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"
if [ -n "$NCU" ]; then
  "$NCU" --version | tail -1
  for sd in ${DTYPES:-float32 bfloat16}; do
    for mode in ${MODES:-none steady all}; do
      timeout 150 "$NCU" --nvtx --nvtx-include prof/ --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum \
        --csv --page details python "$HERE/ncu_state.py" --mode "$mode" --dtype "$sd" --extra "${EXTRA:-{\}}" \
        >"$O/ncu_${sd}_$mode.csv" 2>"$O/ncu_err.txt"
      echo "$sd $mode rc=$? $(wc -l <"$O/ncu_${sd}_$mode.csv") lines"
      grep -E '"(Duration|DRAM Throughput|L2 Hit Rate|Achieved Occupancy|Registers Per Thread|Memory Throughput|dram__bytes_read.sum|dram__bytes_write.sum)"' \
        "$O/ncu_${sd}_$mode.csv" | cut -d, -f12-16 | head -8
    done
  done
  tail -5 "$O/ncu_err.txt"
  python - "$O" <<'PY'  # the eight files that come back: the six CSVs as one
import glob, io, os, sys, pandas as pd
out = sys.argv[1]
frames = []
for p in sorted(glob.glob(f"{out}/ncu_*_*.csv")):
    try:
        # ncu's CSV follows the program's own output and ==PROF== lines: keep its quoted rows
        rows = [line for line in open(p) if line.startswith('"')]
        frames.append(pd.read_csv(io.StringIO("".join(rows))).assign(run=os.path.basename(p)[4:-4]))
        os.remove(p)
    except Exception as e:
        print(p, e)
if frames:
    pd.concat(frames).to_csv(f"{out}/ncu_state.csv", index=False)
PY
else
  timeout 300 python -m replayssm_kernels.profile_launches --isolated --cursors none all --cache-lengths 16 \
    --dtype-pairs float32/bfloat16 --extra '[{}, {"flush_block_k": 32, "flush_k_stages": 2}, {"flush_k_stages": 2},
    {"block_sizes": [32, 32], "num_warps": 1}]' --out "$O/iso" 2>&1 | grep -v Warn | tail -40
fi
