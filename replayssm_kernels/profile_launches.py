"""``python -m replayssm_kernels.profile_launches``: where a decode step's device time goes, per kernel.

The benchmark times a whole step; this splits it. It runs the benchmark's steady-state workload (same
inputs, same cursor schedule) for a few flush cycles under ``torch.profiler`` and reports each GPU
kernel's mean device time per step, so a ReplaySSM step shows its ring-weights launch and its state
launch separately, beside the standard kernel. Kernel durations come from CUPTI, without CUDA graphs:
the sum per step is close to, not equal to, the benchmark's graph-timed figure. With three launches
(the default design from L = 8 on) the state and flush launches run one Helion kernel; they are
told apart by their order in the step and reported as ``<kernel>#1`` (state) and ``#2`` (flush).

    python -m replayssm_kernels.profile_launches --cache-lengths 1 4 16 64 --out results/profile
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import torch

from .bench import Case, Workload, _dtype_pair, _slot_sets

CSV_COLUMNS = [
    "impl", "batch", "num_q_heads", "num_v_heads", "key_dim", "value_dim", "cache_length", "state_dtype",
    "cache_dtype", "kernel", "launches_per_step", "us_per_step", "device",
]  # fmt: skip


def kernel_times(launches, cycles: int) -> dict[str, tuple[float, float]]:
    """{kernel: (launches per step, device microseconds per step)} over ``cycles`` runs of ``launches``.

    A kernel that runs several times a step (the state and the flush launch of a three-launch step
    share one Helion body) is reported once per occurrence, in launch order: ``<name>#1``, ``#2``."""
    from torch.profiler import ProfilerActivity, profile

    for f in launches:  # compile and warm up
        f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(cycles):
            for f in launches:
                f()
        torch.cuda.synchronize()
    runs: dict[str, list[tuple[float, float]]] = defaultdict(list)  # name -> [(start, device us)]
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            us = event.device_time_total if hasattr(event, "device_time_total") else event.cuda_time
            runs[event.name].append((event.time_range.start, us))
    steps = cycles * len(launches)
    times = {}
    for name, events in runs.items():
        events.sort()
        per_step = len(events) // steps if len(events) % steps == 0 else 1
        for r in range(per_step):
            mine = events[r::per_step]
            times[name if per_step == 1 else f"{name}#{r + 1}"] = (len(mine) / steps, sum(us for _, us in mine) / steps)
    return times


def main(argv=None) -> int:
    import pandas as pd

    from .envinfo import write_env_json

    ap = argparse.ArgumentParser(prog="python -m replayssm_kernels.profile_launches")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--heads", type=int, default=32, help="HV (= H)")
    ap.add_argument("--dim", type=int, default=128, help="K = V")
    ap.add_argument("--cache-lengths", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--dtype-pairs", type=_dtype_pair, nargs="+", default=[("float32", "bfloat16")])
    ap.add_argument("--cycles", type=int, default=3, help="flush cycles profiled per case")
    ap.add_argument("--out", type=Path, default=Path("results/profile"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("profiling needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    rows = []
    for (sd, cd), L in [(p, L) for p in args.dtype_pairs for L in args.cache_lengths]:
        case = Case(args.batch, args.heads, args.heads, args.dim, args.dim, L, sd, cd)
        work = Workload(case, _slot_sets(case, l2, 4), device)
        impls = ["replayssm_helion"] + (["standard_helion"] if L == args.cache_lengths[0] else [])
        for impl in impls:
            for name, (n, us) in sorted(kernel_times(work.steps(impl, "fast"), args.cycles).items()):
                rows.append(
                    {
                        "impl": impl, "batch": case.batch, "num_q_heads": case.num_q_heads,
                        "num_v_heads": case.num_v_heads, "key_dim": case.key_dim, "value_dim": case.value_dim,
                        "cache_length": L if impl == "replayssm_helion" else 0, "state_dtype": sd,
                        "cache_dtype": cd if impl == "replayssm_helion" else "", "kernel": name,
                        "launches_per_step": n, "us_per_step": us, "device": props.name,
                    }
                )  # fmt: skip
                print(f"{impl:18s} L={L:<3d} {sd}/{cd} {name[:60]:60s} x{n:.2f} {us:8.2f} us/step", flush=True)
        del work
        torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=CSV_COLUMNS).to_csv(args.out / "launch_times.csv", index=False)
    command = "python -m replayssm_kernels.profile_launches " + " ".join(argv if argv is not None else sys.argv[1:])
    write_env_json(args.out / "env.json", config={"command": command, **{k: str(v) for k, v in vars(args).items()}})
    print(f"wrote {args.out / 'launch_times.csv'} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
