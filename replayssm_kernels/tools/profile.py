"""``python -m replayssm_kernels.tools.profile``: where a decode step's device time goes, per kernel.

The benchmark times a whole step; this splits it. It runs the benchmark's steady-state workload (same
inputs, same cursor schedule) for a few flush cycles under ``torch.profiler`` and reports each GPU
kernel's mean device time per step, so a ReplaySSM step shows its ring-weights launch and its state
launch separately, beside the standard kernel. Kernel durations come from CUPTI, without CUDA graphs:
the sum per step is close to, not equal to, the benchmark's graph-timed figure.

``--isolated`` times each launch of a step alone instead, under a CUDA graph (one graph per launch,
rotated over the slot sets), with the cursors of ``--cursors``: ``steady`` (the benchmark's staggered
schedule), ``none`` (every cursor 0: no row flushes, so a flush launch's programs all exit after the
row setup) or ``all`` (every cursor L - 1: every row flushes). It writes ``launch_isolated.csv``.

    python -m replayssm_kernels.tools.profile --cache-lengths 1 4 16 64 --out /tmp/profile
    python -m replayssm_kernels.tools.profile --isolated --cursors steady none all --cache-lengths 16 --out /tmp/p
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
from collections import defaultdict
from pathlib import Path

import torch

from .bench import Case, Workload, dtype_pair, slot_sets

CSV_COLUMNS = [
    "impl", "batch", "num_q_heads", "num_v_heads", "key_dim", "value_dim", "cache_length", "state_dtype",
    "cache_dtype", "kernel", "launches_per_step", "us_per_step", "device",
]  # fmt: skip


def kernel_times(launches, cycles: int) -> dict[str, tuple[float, float]]:
    """{kernel: (launches per step, device microseconds per step)} over ``cycles`` runs of ``launches``.

    A kernel that runs several times a step is reported once per occurrence, in launch order:
    ``<name>#1``, ``#2``."""
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


CURSOR_MODES = ("steady", "none", "all")


def isolated_plans(work, mode: str, extra: dict | None = None) -> list[list]:
    """The launches of every (slot set, step of the cycle) of ``work`` with the cursors of ``mode``,
    built but not run (``isolated_times``). ``extra`` overrides fields and kernel options of the table's
    entry for the default design; its key ``launches`` (not a config field) picks another design
    instead, with that design's entry and the rest of ``extra``."""
    from ..configs import DTYPE_NAMES, device_key, lookup, shape_class
    from ..plan import LAUNCH_KINDS, default_launches, plan_replayssm
    from .bench import DTYPES

    case, w = work.case, work.weights
    L = case.cache_length
    extra = dict(extra or {})
    launches = extra.pop("launches", None)  # a design other than the default's, with its own table entry
    config = None
    if extra:
        kind = LAUNCH_KINDS[default_launches(L, work.device) if launches is None else launches]
        cls = shape_class(kind, case.key_dim, case.value_dim, L)
        entry, _ = lookup(kind, device_key(work.device), DTYPE_NAMES[DTYPES[case.state_dtype]], cls)
        config = entry | extra
    fixed = {"none": 0, "all": L - 1}
    plans = []
    for idx, t in itertools.product(work.indices, range(L)):
        wp = work.cursors[t] if mode == "steady" else torch.full_like(work.cursors[t], fixed[mode])
        mixed, a, b = work.tokens[t]
        plans.append(
            plan_replayssm(
                mixed, a, b, w.A_log, w.dt_bias, w.scale, work.state, work.d_cache, work.k_cache, work.g_cache,
                work.out, idx, wp, None, True, None, launches=launches, check_values=False, config=config,
            )
        )  # fmt: skip
    return plans


def isolated_times(work, mode: str, extra: dict | None = None) -> dict[str, float]:
    """{launch name: graph-timed microseconds per launch} for each launch of a ReplaySSM step run alone,
    and ``"step"``: the whole step as the decode runs it (``run_launches``: a launch marked ``beside``
    on a second stream), graph-timed the same way.

    The step's launches are built once per (slot set, step of the cycle) with the cursors of ``mode``
    (``isolated_plans``, which ``extra`` goes to) and every launch runs once in order first, so each
    one's inputs (launch 1's scratch buffers) are real; then each launch kind is captured alone, all
    its copies in one graph."""
    from ..plan import run_launches
    from .bench import time_graph

    plans = isolated_plans(work, mode, extra)
    for plan in plans:
        for launch in plan:
            launch()
    times = {plan_launch.name: time_graph([p[i] for p in plans])[0] for i, plan_launch in enumerate(plans[0])}
    times["step"] = time_graph([functools.partial(run_launches, p) for p in plans])[0]
    return times


def _isolated_main(args, device, props, l2) -> int:
    import pandas as pd

    from .envinfo import write_env_json

    rows = []
    variants = json.loads(args.extra) if args.extra else [{}]
    args.out.mkdir(parents=True, exist_ok=True)
    for (sd, cd), L in itertools.product(args.dtype_pairs, args.cache_lengths):
        case = Case(args.batch, args.heads, args.heads, args.dim, args.dim, L, sd, cd)
        work = Workload(case, slot_sets(case, l2, 4), device)
        for (v, extra), mode in itertools.product(enumerate(variants), args.cursors):
            for name, us in isolated_times(work, mode, extra=extra).items():
                rows.append({"cache_length": L, "state_dtype": sd, "cache_dtype": cd, "variant": v,
                             "extra": json.dumps(extra), "cursors": mode, "launch": name, "us_per_launch": us,
                             "batch": case.batch, "num_v_heads": case.num_v_heads, "key_dim": case.key_dim,
                             "device": props.name})  # fmt: skip
                print(f"L={L:<3d} {sd}/{cd} v{v} cursors={mode:6s} {name:14s} {us:8.2f} us", flush=True)
            pd.DataFrame(rows).to_csv(args.out / "launch_isolated.csv", index=False)  # as it goes
        del work
        torch.cuda.empty_cache()
    write_env_json(args.out / "env_isolated.json", config={k: str(v) for k, v in vars(args).items()})
    print(f"wrote {args.out / 'launch_isolated.csv'} ({len(rows)} rows)")
    return 0


def main(argv=None) -> int:
    import pandas as pd

    from .envinfo import write_env_json

    ap = argparse.ArgumentParser(prog="python -m replayssm_kernels.tools.profile", description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256, help="rows per step")
    ap.add_argument("--heads", type=int, default=32, help="HV (= H)")
    ap.add_argument("--dim", type=int, default=128, help="K = V")
    ap.add_argument("--cache-lengths", type=int, nargs="+", default=[1, 4, 16, 64], help="ring lengths L")
    ap.add_argument(
        "--dtype-pairs", type=dtype_pair, nargs="+", default=[("float32", "bfloat16")], help="state/ring dtypes"
    )
    ap.add_argument("--cycles", type=int, default=3, help="flush cycles profiled per case")
    ap.add_argument("--out", type=Path, required=True, help="folder for the CSV and env.json")
    ap.add_argument("--isolated", action="store_true", help="time each launch alone under a CUDA graph")
    ap.add_argument("--cursors", nargs="+", choices=CURSOR_MODES, default=["steady"], help="with --isolated")
    ap.add_argument(
        "--extra",
        help="with --isolated: a JSON list of overrides of the table's entry, each timed as a variant "
        '(a key "launches" picks another design: 2 or 3)',
    )
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("profiling needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    if args.isolated:
        return _isolated_main(args, device, props, l2)
    rows = []
    for (sd, cd), L in [(p, L) for p in args.dtype_pairs for L in args.cache_lengths]:
        case = Case(args.batch, args.heads, args.heads, args.dim, args.dim, L, sd, cd)
        work = Workload(case, slot_sets(case, l2, 4), device)
        impls = ["replayssm_helion"] + (["standard_helion"] if L == args.cache_lengths[0] else [])
        for impl in impls:
            for name, (n, us) in sorted(kernel_times(work.steps(impl), args.cycles).items()):
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
    command = "python -m replayssm_kernels.tools.profile " + " ".join(argv if argv is not None else sys.argv[1:])
    write_env_json(args.out / "env.json", config={"command": command, **{k: str(v) for k, v in vars(args).items()}})
    print(f"wrote {args.out / 'launch_times.csv'} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
