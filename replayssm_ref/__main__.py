"""``python -m replayssm_ref``: sanity run of ReplaySSM against the standard recurrence.

For each cache length x head config x state dtype, steps a batch through whole flush cycles (natural
and forced flushes, padded rows, NaN-filled stale ring entries, sentinel-filled unused slots) and
compares outputs every step and checkpoints at every flush with a float64 standard decode, per
(row, value head), within ``harness.tolerance`` of the dtype and step count. Prints each case as it
finishes (stderr), then a table. Exit status: 0 all pass, 1 any failure, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from .harness import DTYPES, Problem, run_sequence, tolerance

CLI_DTYPES = ("float64", "float32", "bfloat16")
FLOAT64_TOLERANCE = 1e-12  # float64 replay against the float64 recurrence: exact up to reassociation


def case_tolerance(name: str, steps: int) -> float:
    return FLOAT64_TOLERANCE if name == "float64" else tolerance(DTYPES[name], steps=steps)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _heads(text: str) -> tuple[int, int]:
    try:
        h, hv = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected H/HV like 2/4, got {text!r}") from None
    if h < 1 or hv % h:
        raise argparse.ArgumentTypeError(f"HV must be a positive multiple of H, got {text!r}")
    return h, hv


def _dims(text: str) -> tuple[int, int]:
    try:
        k, v = (int(x) for x in text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KxV like 16x32, got {text!r}") from None
    if k < 1 or v < 1 or k & (k - 1) or v & (v - 1):
        raise argparse.ArgumentTypeError(f"K and V must be powers of two, got {text!r}")
    return k, v


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m replayssm_ref",
        description="Check ReplaySSM decode against the float64 standard KDA recurrence.",
    )
    ap.add_argument(
        "--cache-lengths", type=_positive_int, nargs="+", default=[1, 2, 3, 4, 8, 16], metavar="L",
        help="ring lengths L (default 1 2 3 4 8 16)",
    )  # fmt: skip
    ap.add_argument(
        "--heads", type=_heads, nargs="+", default=[(1, 1), (2, 4), (4, 16)], metavar="H/HV",
        help="q/k heads / value heads (default 1/1 2/4 4/16)",
    )  # fmt: skip
    ap.add_argument("--dims", type=_dims, default=(16, 32), metavar="KxV", help="key x value dim (default 16x32)")
    ap.add_argument("--batch", type=_positive_int, default=4, help="rows per step (default 4)")
    ap.add_argument("--steps", type=_positive_int, default=None, help="steps per case (default 2L+3: two cycles)")
    ap.add_argument("--dtypes", nargs="+", choices=CLI_DTYPES, default=list(CLI_DTYPES), help="state dtypes")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    args = ap.parse_args(argv)
    try:
        torch.ones(1, device=args.device) + 1
    except Exception as exc:  # torch raises several types here, some with pages of detail
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].split(". ")[0][:120]
        print(f"{ap.prog}: error: --device {args.device!r} is not usable here: {first}", file=sys.stderr)
        raise SystemExit(2) from None
    return args


def run_grid(args: argparse.Namespace, progress=None) -> list[dict]:
    rows = []
    for L in args.cache_lengths:
        for h, hv in args.heads:
            for name in args.dtypes:
                p = Problem(args.batch, h, hv, args.dims[0], args.dims[1], L)
                steps = args.steps or 2 * L + 3
                t0 = time.perf_counter()
                r = run_sequence(
                    p, steps=steps, seed=args.seed + 1000 * L + hv, state_dtype=DTYPES[name], device=args.device
                )
                tol = case_tolerance(name, steps)
                ok = r.max_rel <= tol and not r.nonfinite and r.untouched_ok
                rows.append(
                    {
                        "case": p.label(),
                        "state_dtype": name,
                        "steps": steps,
                        "natural_flushes": r.natural_flushes,
                        "forced_flushes": r.forced_flushes,
                        "max_out_rel": r.max_out_rel,
                        "max_state_rel": r.max_state_rel,
                        "tolerance": tol,
                        "untouched_ok": r.untouched_ok,
                        "finite": not r.nonfinite,
                        "passed": ok,
                        "seconds": time.perf_counter() - t0,
                    }
                )
                if progress:
                    progress(rows[-1])
    return rows


def _print_table(rows: list[dict]) -> None:
    headers = ["case", "state", "steps", "nat/forced", "max rel out", "max rel ckpt", "tol", "result"]

    def cells(r):
        return [
            r["case"],
            r["state_dtype"],
            str(r["steps"]),
            f"{r['natural_flushes']}/{r['forced_flushes']}",
            f"{r['max_out_rel']:.2e}",
            f"{r['max_state_rel']:.2e}",
            f"{r['tolerance']:.0e}",
            "pass" if r["passed"] else "FAIL",
        ]

    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(*headers, title="ReplaySSM vs float64 standard recurrence")
        for r in rows:
            c = cells(r)
            c[-1] = "[green]pass[/]" if r["passed"] else "[bold red]FAIL[/]"
            table.add_row(*c)
        Console().print(table)
        return
    body = [headers] + [cells(r) for r in rows]
    widths = [max(len(line[i]) for line in body) for i in range(len(headers))]
    for line in body:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    total = len(args.cache_lengths) * len(args.heads) * len(args.dtypes)
    t0 = time.perf_counter()
    if sys.stderr.isatty() and not args.json:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task("checking", total=total)
            rows = run_grid(args, progress=lambda _: bar.advance(task))
    else:

        def report(row: dict) -> None:
            done = report.count = getattr(report, "count", 0) + 1
            verdict = "pass" if row["passed"] else "FAIL"
            print(f"[{done}/{total}] {row['case']} {row['state_dtype']}: {verdict} ({row['seconds']:.1f} s)",
                  file=sys.stderr, flush=True)  # fmt: skip

        rows = run_grid(args, progress=report)
    failed = [r for r in rows if not r["passed"]]
    if args.json:
        print(json.dumps({"passed": not failed, "cases": rows}, indent=1))
    else:
        _print_table(rows)
        elapsed = time.perf_counter() - t0
        verdict = f"{len(failed)} of {total} cases FAILED" if failed else f"all {total} cases passed"
        print(f"{verdict} in {elapsed:.1f} s (device {args.device}, seed {args.seed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
