"""``python -m replayssm_kernels.gpu_check``: both kernels against the float64 reference on a GPU.

Grid (issue 3): K = V = 128, HV in {4, 16, 32}, GQA ratio 1 and 2, L in {1, 4, 16, 64}, state/ring
dtypes fp32/bf16, fp32/fp32 and bf16/bf16, both precision modes, 3L+2 steps with forced flushes and
padded rows. Writes one CSV row per run and prints the worst errors per (kernel, dtypes, mode).
Exit status 1 if any run exceeds its tolerance, produced NaN, or touched what it must not.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import sys
from pathlib import Path

import torch

from replayssm_ref.harness import Problem, run_sequence

from . import helion_fused_recurrent_kda_packed_decode, helion_fused_recurrent_kda_replayssm_decode
from .envinfo import write_env_json
from .kda_decode import PRECISIONS

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# Max relative error vs the float64 standard recurrence, outputs and checkpoints (bf16 out for both).
TOLERANCES = {("float32", "fast"): 5e-3, ("float32", "precise"): 5e-3, ("bfloat16", "fast"): 3e-2}


def tolerance(state_dtype: str, cache_dtype: str, precision: str) -> float:
    return TOLERANCES.get((state_dtype, precision), 3e-2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m replayssm_kernels.gpu_check")
    ap.add_argument("--heads", type=int, nargs="+", default=[4, 16, 32])
    ap.add_argument("--gqa", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--cache-lengths", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    ap.add_argument("--out", type=Path, default=Path("results/gpu_check"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_check needs a CUDA GPU", file=sys.stderr)
        return 2
    import pandas as pd

    pairs = [("float32", "bfloat16"), ("float32", "float32"), ("bfloat16", "bfloat16")]
    rows = []
    args.out.mkdir(parents=True, exist_ok=True)
    write_env_json(args.out / "env.json", config=vars(args) | {"command": " ".join(sys.argv)})  # first: survives a cut
    for HV, gqa, L, (sd, cd), precision in itertools.product(
        args.heads, args.gqa, args.cache_lengths, pairs, args.precisions
    ):
        p = Problem(args.batch, HV // gqa, HV, args.dim, args.dim, L)
        # the default design (launches=); the modes differ only in how flush rows rebuild the state
        fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, precision=precision)
        r = run_sequence(
            p, steps=3 * L + 2, seed=HV * 100 + L, replay_fn=fn, state_dtype=DTYPES[sd],
            cache_dtype=DTYPES[cd], input_dtype=torch.bfloat16, out_dtype=torch.bfloat16, device="cuda",
            p_force=0.2,
        )  # fmt: skip
        rows.append(_row("replayssm_helion", p, sd, cd, precision, r))
        # the standard kernel has no ring and no modes: once per shape
        if L == args.cache_lengths[0] and cd == sd and precision == args.precisions[0]:
            r = run_sequence(
                p, steps=8, seed=HV, replay_fn=helion_fused_recurrent_kda_packed_decode, standard=True,
                state_dtype=DTYPES[sd], input_dtype=torch.bfloat16, out_dtype=torch.bfloat16, device="cuda",
            )  # fmt: skip
            rows.append(_row("standard_helion", p, sd, "", "", r))
        pd.DataFrame(rows).to_csv(
            args.out / "kernel_errors.csv", index=False
        )  # after every run: partial runs keep data
        last = rows[-1]
        print(
            f"{last['impl']:16s} {p.label():28s} {sd}/{cd or '-'} {last['precision'] or '-':7s} "
            f"out {last['max_out_rel']:.2e} state {last['max_state_rel']:.2e} {'ok' if last['passed'] else 'FAIL'}",
            flush=True,
        )
    df = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "kernel_errors.csv", index=False)
    worst = (
        df.groupby(["impl", "state_dtype", "cache_dtype", "precision"])[["max_out_rel", "max_state_rel", "max_abs"]]
        .max()
        .reset_index()
    )
    worst.to_csv(args.out / "worst_errors.csv", index=False)
    print(worst.to_string(index=False))
    failed = df[~df["passed"]]
    print(f"{len(df) - len(failed)} of {len(df)} runs passed")
    return 1 if len(failed) else 0


def _row(impl, p, sd, cd, precision, r) -> dict:
    tol = tolerance(sd, cd, precision or "fast")
    return {
        "impl": impl, "case": p.label(), "num_q_heads": p.num_q_heads, "num_v_heads": p.num_v_heads,
        "cache_length": p.cache_length if impl == "replayssm_helion" else 0, "state_dtype": sd, "cache_dtype": cd,
        "precision": precision, "steps": r.steps, "natural_flushes": r.natural_flushes,
        "forced_flushes": r.forced_flushes, "max_out_rel": r.max_out_rel, "max_state_rel": r.max_state_rel,
        "max_abs": r.max_abs, "tolerance": tol, "finite": not r.nonfinite, "untouched_ok": r.untouched_ok,
        "passed": r.max_rel <= tol and not r.nonfinite and r.untouched_ok,
    }  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
