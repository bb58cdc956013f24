"""``python -m replayssm_kernels.tools.gpu_check``: both kernels against the float64 reference on a GPU.

Grid: KDA and Gated DeltaNet (``gate``), K = V = 128, HV in {4, 16, 32}, GQA ratio 1 and 2, L in
{1, 4, 16, 64}, state/ring dtypes fp32/bf16, fp32/fp32 and bf16/bf16, KDA's softplus and bounded decays
(``decay``; GDN's is softplus), each ring format the decay and L allow (``replayssm_ref.formats``; GDN:
raw), the default design, 3L+2 steps (rings started warm) with forced
flushes and padded rows, bf16 inputs and outputs. Errors are the worst per (row, value head); the
tolerance is ``replayssm_ref.harness.tolerance`` of the dtypes and steps. Writes one CSV row per run
(``kernel_errors.csv`` beside ``env.json``); exit status 1 if any run exceeds its tolerance, produced
a non-finite value, or touched what it must not.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import sys
from pathlib import Path

import torch

from replayssm_ref.formats import RING_FORMATS, ring_format
from replayssm_ref.harness import DTYPES, Problem, run_sequence, tolerance

from .. import (
    helion_fused_recurrent_gdn_packed_decode,
    helion_fused_recurrent_gdn_replayssm_decode,
    helion_fused_recurrent_kda_packed_decode,
    helion_fused_recurrent_kda_replayssm_decode,
)
from .envinfo import write_env_json

KERNELS = {  # gate -> (ReplaySSM step, standard step)
    "kda": (helion_fused_recurrent_kda_replayssm_decode, helion_fused_recurrent_kda_packed_decode),
    "gdn": (helion_fused_recurrent_gdn_replayssm_decode, helion_fused_recurrent_gdn_packed_decode),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m replayssm_kernels.tools.gpu_check", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--heads", type=int, nargs="+", default=[4, 16, 32], help="HV values")
    ap.add_argument("--gqa", type=int, nargs="+", default=[1, 2], help="HV/H ratios")
    ap.add_argument("--cache-lengths", type=int, nargs="+", default=[1, 4, 16, 64], help="ring lengths L")
    ap.add_argument("--dim", type=int, default=128, help="K = V")
    ap.add_argument("--batch", type=int, default=8, help="rows per step")
    ap.add_argument(
        "--ring-formats", nargs="+", choices=sorted(RING_FORMATS), default=sorted(RING_FORMATS), help="ring formats"
    )
    ap.add_argument(
        "--lower-bounds", nargs="+", type=lambda x: None if x.lower() == "none" else float(x), default=[None, -5.0],
        help="KDA's decays: 'none' (softplus) or a bounded gate's lower bound",
    )  # fmt: skip
    ap.add_argument("--gates", nargs="+", choices=sorted(KERNELS), default=["kda", "gdn"], help="KDA and/or GDN")
    ap.add_argument("--out", type=Path, required=True, help="folder for kernel_errors.csv and env.json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_check needs a CUDA GPU", file=sys.stderr)
        return 2
    import pandas as pd

    pairs = [("float32", "bfloat16"), ("float32", "float32"), ("bfloat16", "bfloat16")]
    rows = []
    args.out.mkdir(parents=True, exist_ok=True)
    write_env_json(args.out / "env.json", config=vars(args) | {"command": " ".join(sys.argv)})  # first: survives a cut
    grid = itertools.product(
        args.gates, args.heads, args.gqa, args.cache_lengths, pairs, args.lower_bounds, args.ring_formats
    )
    for gate, HV, gqa, L, (sd, cd), lb, fmt in grid:
        if gate == "gdn" and (fmt != "raw" or lb != args.lower_bounds[0]):
            continue  # GDN: the softplus decay and raw rings, once
        lb = lb if gate == "kda" else None
        replay, standard = KERNELS[gate]
        try:
            ring_format(fmt).check_gate(lb, L)
        except ValueError:
            continue  # the format cannot hold this gate's decay over this ring
        if L == 1 and fmt != "raw":
            continue  # no ring: every format is the same step
        p = Problem(args.batch, HV // gqa, HV, args.dim, args.dim, L)
        fn = functools.partial(replay, check_values=True)
        steps = 3 * L + 2 if L <= 16 else 2 * 16 + 2  # long rings start warm, so they wrap within these
        r = run_sequence(
            p, steps=steps, seed=HV * 100 + L, replay_fn=fn, state_dtype=DTYPES[sd],
            cache_dtype=DTYPES[cd], input_dtype=torch.bfloat16, out_dtype=torch.bfloat16, device="cuda",
            p_force=0.2, warm=True, lower_bound=lb, ring_format=fmt, gate=gate,
        )  # fmt: skip
        rows.append(_row("replayssm_helion", p, sd, cd, r, lb, fmt, gate))
        # the standard kernel has no ring: once per shape
        if L == args.cache_lengths[0] and cd == sd and fmt == "raw":
            r = run_sequence(
                p, steps=8, seed=HV, replay_fn=standard, standard=True, state_dtype=DTYPES[sd],
                input_dtype=torch.bfloat16, out_dtype=torch.bfloat16, device="cuda", lower_bound=lb, gate=gate,
            )  # fmt: skip
            rows.append(_row("standard_helion", p, sd, "", r, lb, "", gate))
        pd.DataFrame(rows).to_csv(
            args.out / "kernel_errors.csv", index=False
        )  # after every run: partial runs keep data
        last = rows[-1]
        print(
            f"{last['impl']:16s} {gate} {last['ring_format']:10s} {p.label():28s} {sd}/{cd or '-'} {last['decay']} "
            f"out {last['max_out_rel']:.2e} state {last['max_state_rel']:.2e} {'ok' if last['passed'] else 'FAIL'}",
            flush=True,
        )
    df = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "kernel_errors.csv", index=False)
    errors = ["max_out_rel", "max_state_rel", "max_ring_rel", "max_abs"]
    worst = df.groupby(["gate", "impl", "ring_format", "state_dtype", "cache_dtype"])[errors].max().reset_index()
    print(worst.to_string(index=False))
    failed = df[~df["passed"]]
    print(f"{len(df) - len(failed)} of {len(df)} runs passed")
    return 1 if len(failed) else 0


def _row(impl, p, sd, cd, r, lower_bound, fmt, gate) -> dict:
    tol = tolerance(*(DTYPES[x] for x in (sd, cd or sd)), torch.bfloat16, steps=r.steps)
    return {
        "impl": impl, "case": p.label(), "num_q_heads": p.num_q_heads, "num_v_heads": p.num_v_heads,
        "cache_length": p.cache_length if impl == "replayssm_helion" else 0, "state_dtype": sd, "cache_dtype": cd,
        "ring_format": fmt, "gate": gate, "decay": "softplus" if lower_bound is None else f"bounded{lower_bound:g}",
        "steps": r.steps, "natural_flushes": r.natural_flushes, "forced_flushes": r.forced_flushes,
        "max_out_rel": r.max_out_rel, "max_state_rel": r.max_state_rel, "max_ring_rel": r.ring_rel,
        "max_abs": r.max_abs, "tolerance": tol, "finite": not r.nonfinite, "untouched_ok": r.untouched_ok,
        "passed": r.max_rel <= tol and not r.nonfinite and r.untouched_ok,
    }  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
