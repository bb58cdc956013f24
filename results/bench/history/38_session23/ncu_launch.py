"""One launch of the two-launch L=16 step (B=256, HV=32, K=V=128, bf16 rings) inside an NVTX range
``prof`` for Nsight Compute, as ``../33_*/ncu_state.py`` but for any launch of the plan (``--launch``:
``ring_weights`` is launch 1, ``state`` the state launch):

    ncu --nvtx --nvtx-include prof/ ... python ncu_launch.py --launch ring_weights --mode steady

Every launch of every plan runs once first (compile, real scratch), then the named launch is profiled."""

import argparse
import json

import torch

from replayssm_kernels.bench import Case, Workload, _slot_sets
from replayssm_kernels.profile_launches import isolated_plans

ap = argparse.ArgumentParser()
ap.add_argument("--launch", default="ring_weights")
ap.add_argument("--mode", choices=("none", "steady", "all"), default="steady")
ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
ap.add_argument("--extra", type=json.loads, default={})
args = ap.parse_args()
case = Case(256, 32, 32, 128, 128, 16, args.dtype, "bfloat16")
props = torch.cuda.get_device_properties(0)
work = Workload(case, _slot_sets(case, getattr(props, "L2_cache_size", 50 << 20), 4), torch.device("cuda"))
plans = isolated_plans(work, args.mode, extra=args.extra)
for plan in plans:
    for launch in plan:
        launch()
plans[0][0]()  # the first plan's launch 1 again: its scratch is a later launch's input
torch.cuda.synchronize()
target = next(launch for launch in plans[0] if launch.name == args.launch)
torch.cuda.nvtx.range_push("prof")
target()
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("profiled", args.launch, args.mode, args.dtype, json.dumps(args.extra))
