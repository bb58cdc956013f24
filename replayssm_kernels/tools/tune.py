"""``python -m replayssm_kernels.tools.tune``: write ``configs/<device>.json`` from timings on a GPU.

Two ways, both recorded in the file's ``tuned_by``:

* ``--search grid`` (default): time every config of a small explicit grid (V tile, warps, stages) with
  the benchmark's CUDA-graph harness on a representative shape per class; keep the fastest. Minutes.
* ``--search helion``: Helion's own autotuner on the same shapes (``helion.kernel`` with no config).
  Much slower (tens of minutes per kernel); use it when the grid looks like it misses something.

Nothing else in the project autotunes: the kernels only ever read these files.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
from pathlib import Path

import torch

from replayssm_ref.harness import Problem, run_sequence, tolerance

from .. import helion_fused_recurrent_kda_replayssm_decode
from ..configs import CONFIG_DIR, device_key, shape_class
from ..plan import LAUNCH_KINDS
from .bench import DTYPES, REPLAYSSM_LAUNCHES, Case, Workload, dtype_pair, is_replayssm, time_graph
from .codegen import device_resources

# The ReplaySSM state kernels: block_sizes = [V tile, K chunk], the depth of their pipelined K loop the
# option ``k_stages``; the standard kernel: block_sizes = [V tile]. Every key but block_sizes /
# num_warps / num_stages is a kernel option (replayssm_kernels.options.KernelOptions).
GRID = {
    "block_sizes": [[64, 32], [128, 32], [128, 64]],
    "num_warps": [2, 4],
    "num_stages": [1],
    "k_stages": [1, 3],
    "flush_block_k": [32],
}
# config kind -> the bench impl that times it: each ReplaySSM design by its launches= count
KINDS = {LAUNCH_KINDS[n]: impl for impl, n in REPLAYSSM_LAUNCHES.items() if n is not None}
KINDS["standard"] = "standard_helion"
MAX_STATE_PER_THREAD = 128  # fp32 state values a thread may hold (a state tile / threads); more spills


def _grid_from(text: str) -> dict:
    """``--grid '{"block_sizes": [[64, 32], [128, 32]], "num_warps": [4]}'`` narrows the default grid."""
    return GRID | json.loads(text)


def grid_configs(grid: dict = GRID) -> list[dict]:
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*grid.values())]


def table_entry(kind: str, point: dict, key_dim: int, exact_fit: bool = False) -> dict | None:
    """A grid point as a config-table entry for ``kind``, or None if it cannot fit or means nothing.

    The standard kernel holds a ``[V tile, K]`` state tile and has none of the ReplaySSM options (its
    entry keeps only the V tile, warps and stages); the ReplaySSM kernels hold one ``[V tile, K chunk]``
    chunk at a time."""
    cfg = dict(point)
    if kind == "standard":
        cfg = {k: cfg[k] for k in ("num_warps", "num_stages") if k in cfg} | {"block_sizes": cfg["block_sizes"][:1]}
    chunk = cfg["block_sizes"][1] if len(cfg["block_sizes"]) > 1 else key_dim
    tile = cfg["block_sizes"][0] * min(chunk, key_dim)
    per_thread = tile / (32 * cfg["num_warps"])
    if per_thread > MAX_STATE_PER_THREAD or (exact_fit and per_thread != MAX_STATE_PER_THREAD):
        return None
    return cfg


def _standard_points(points: list[dict]) -> list[dict]:
    """The distinct V-tile / warp / stage choices of ``points``, without the ReplaySSM-only options."""
    distinct = {json.dumps(table_entry("standard", p, 0), sort_keys=True) for p in points}
    return [json.loads(d) for d in sorted(distinct)]


def check_candidate(
    impl: str, cfg: dict, case: Case, device, decode=helion_fused_recurrent_kda_replayssm_decode
) -> float:
    """The candidate's largest relative error (outputs and checkpoints) against the float64 recurrence
    over ``2L + 3`` steps on a 64-row batch of the case's heads and dims, with forced flushes and padding
    rows, so that a fast but wrong config (a pipelined loop reading what it writes, say) is never tabled.
    ``inf`` if it produced NaN or touched what it must not."""
    p = Problem(64, case.num_q_heads, case.num_v_heads, case.key_dim, case.value_dim, case.cache_length)
    fn = functools.partial(decode, launches=REPLAYSSM_LAUNCHES[impl], config=cfg)
    r = run_sequence(
        p, steps=2 * p.cache_length + 3, seed=p.cache_length, replay_fn=fn, state_dtype=DTYPES[case.state_dtype],
        cache_dtype=DTYPES[case.cache_dtype], input_dtype=torch.bfloat16, out_dtype=torch.bfloat16, device=device,
        p_force=0.2, warm=True,
    )  # fmt: skip
    return r.max_rel if r.untouched_ok and not r.nonfinite else float("inf")


def _resources(work: Workload, impl: str, cfg) -> dict:
    """The device's compile of each launch of a timed point, as columns ``<launch>_<field>`` (e.g.
    ``state_registers``, ``state_local_bytes``, ``state_programs_per_sm``): ``device_resources``. A
    failure to read them costs the columns, never the timing."""
    if cfg == "autotune":
        return {}
    try:
        plan = work.plan(impl, config=cfg)
        return {f"{launch.name}_{k}": v for launch in plan for k, v in device_resources(launch).items()}
    except Exception as exc:  # internals of Triton's caches; a new version may move them
        print(f"  (no register readout: {type(exc).__name__}: {exc})", flush=True)
        return {}


def main(argv=None) -> int:
    import pandas as pd

    ap = argparse.ArgumentParser(prog="python -m replayssm_kernels.tools.tune", description=__doc__.splitlines()[0])
    ap.add_argument("--search", choices=("grid", "helion"), default="grid", help="an explicit grid, or Helion's")
    ap.add_argument("--batch", type=int, default=256, help="rows of the timed shape")
    ap.add_argument("--heads", type=int, default=32, help="H = HV of the timed shape")
    ap.add_argument("--dim", type=int, default=128, help="K = V of the timed shape")
    ap.add_argument("--cache-lengths", type=int, nargs="+", default=[16, 32, 64], help="one per ring block class")
    ap.add_argument(
        "--dtype-pairs", type=dtype_pair, nargs="+", default=[("float32", "bfloat16"), ("bfloat16", "bfloat16")],
        help="state/ring dtype pairs",
    )  # fmt: skip
    ap.add_argument(
        "--kernels",
        nargs="+",
        choices=KINDS,
        default=["replayssm", "standard"],
        help="replayssm: two launches; replayssm_split: three launches; standard: the standard kernel",
    )
    ap.add_argument("--trials-csv", type=Path, required=True, help="every timed candidate, one row each")
    ap.add_argument("--rep-ms", type=int, default=60, help="timing window per candidate")
    ap.add_argument("--grid", type=_grid_from, default=GRID, help="JSON dict overriding parts of the grid")
    ap.add_argument(
        "--exact-fit",
        action="store_true",
        help=f"only V tiles / warps giving {MAX_STATE_PER_THREAD} state values a thread",
    )
    ap.add_argument(
        "--points",
        type=json.loads,
        help="JSON list of table entries to time instead of the grid (ring options "
        "are dropped for the standard kernel)",
    )
    ap.add_argument(
        "--cursor-seed",
        type=int,
        help="time with the cycle's cursors dealt to rows in a random order (bench.cursor_schedule) "
        "instead of row %% L",
    )
    ap.add_argument("--fresh", action="store_true", help="start the device's table empty instead of updating it")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("tuning needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    path = CONFIG_DIR / f"{device_key(device)}.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    table = previous.get("configs", {}) if not args.fresh else {}
    design = {
        k: previous[k]
        for k in ("split_flush_from_l", "one_launch_up_to_l", "gdn_one_launch_up_to_batch")
        if k in previous
    }  # kept: not a tuned entry
    trials = []
    tuned_by = "python -m replayssm_kernels.tools.tune " + " ".join(argv if argv is not None else sys.argv[1:])
    from .envinfo import write_env_json

    args.trials_csv.parent.mkdir(parents=True, exist_ok=True)
    write_env_json(args.trials_csv.parent / "env.json", config=vars(args) | {"command": tuned_by})

    def save():  # after every trial, so a run cut short keeps what it measured
        pd.DataFrame(trials).to_csv(args.trials_csv, index=False)
        doc = {"device": torch.cuda.get_device_name(), "tuned_by": tuned_by, **design}
        doc["configs"] = dict(sorted(table.items()))
        path.write_text(json.dumps(doc, indent=1) + "\n")

    for (sd, cd), kernel in itertools.product(args.dtype_pairs, args.kernels):
        kind = kernel
        lengths = args.cache_lengths if kind != "standard" else [1]
        for L in lengths:
            case = Case(args.batch, args.heads, args.heads, args.dim, args.dim, L, sd, cd)
            work = Workload(case, sets=1, device=device, cursor_seed=args.cursor_seed)
            impl = KINDS[kind]
            if args.points is not None:
                candidates = args.points if kind != "standard" else _standard_points(args.points)
            elif args.search == "grid":
                candidates = [
                    c for c in (table_entry(kind, g, args.dim, args.exact_fit) for g in grid_configs(args.grid)) if c
                ]
            else:
                candidates = ["autotune"]
            best = None
            tol = tolerance(DTYPES[sd], DTYPES[cd], torch.bfloat16, steps=2 * L + 3)
            for cfg in candidates:
                try:
                    err = check_candidate(impl, cfg, case, device) if is_replayssm(impl) and cfg != "autotune" else 0.0
                    us = time_graph(work.steps(impl, config=cfg), rep_ms=args.rep_ms)[0]
                except Exception as exc:  # e.g. out of registers / shared memory: skip the config
                    print(f"  {kernel} L={L} {cfg}: {type(exc).__name__}", flush=True)
                    continue
                trials.append({"kernel": kernel, "state_dtype": sd, "cache_dtype": cd, "cache_length": L,
                               "config": json.dumps(cfg), "us_per_step": us, "max_rel": err,
                               "correct": err <= tol, "cursor_seed": args.cursor_seed,
                               **_resources(work, impl, cfg)})  # fmt: skip
                print(f"{kernel:18s} {sd}/{cd} L={L:<3d} {cfg}: {us:8.2f} us, max rel {err:.1e}", flush=True)
                save()
                if err > tol:  # timed for the record, never tabled
                    print(f"  WRONG (tolerance {tol:.0e}): not a candidate", flush=True)
                    continue
                if best is None or us < best[0]:
                    best = (us, cfg)
            if best is not None and isinstance(best[1], dict):
                key = f"{kind}/{sd}/{shape_class(kind, args.dim, args.dim, L)}"
                table[key] = best[1]
                table.setdefault(f"{kind}/{sd}/*", best[1])  # untuned shape classes of this dtype use it
                save()
    save()
    print(f"wrote {path} and {args.trials_csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
