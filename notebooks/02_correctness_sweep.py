# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Correctness sweep: error against the float64 reference
#
# 1. The eager reference in float32 and bfloat16 (state and rings) against the float64 standard
#    recurrence, as a function of ring length `L` and head count `HV`.
# 2. The Helion kernel in each precision mode: on a GPU when one is present; otherwise from the
#    committed H200 CSV (`results/gpu_check/kernel_errors.csv`, made by
#    `python -m replayssm_kernels.gpu_check`), plus a small CPU run through `HELION_INTERPRET=1`.
# 3. Long-horizon drift: output error per step over thousands of steps, standard decode vs ReplaySSM
#    at several `L`, on the same inputs: does replay add error beyond the recurrence's own?

# %% tags=["parameters"]
import os

SMOKE = os.environ.get("REPLAYSSM_SMOKE") == "1"
CACHE_LENGTHS = [1, 2, 4] if SMOKE else [1, 2, 4, 8, 16, 32, 64]
HEADS = [(1, 1), (2, 4)] if SMOKE else [(1, 1), (2, 4), (4, 16)]
DRIFT_STEPS = 64 if SMOKE else 4096
DRIFT_LENGTHS = [1, 8] if SMOKE else [1, 8, 64]
RUN_GPU_CHECK = False  # True re-runs python -m replayssm_kernels.gpu_check on a GPU (minutes)
RESULTS = "results/correctness" + ("/_smoke" if SMOKE else "")

# %%
from pathlib import Path

import pandas as pd
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("HELION_INTERPRET", "1")  # kernels run as eager PyTorch on the CPU

from replayssm_kernels.envinfo import write_env_json
from replayssm_ref.figures import drift_sweep, error_sweep, plot_drift, plot_error_sweep

Path(RESULTS).mkdir(parents=True, exist_ok=True)
write_env_json(
    Path(RESULTS) / "env.json",
    config={
        "command": "python notebooks/02_correctness_sweep.py",
        "smoke": SMOKE,
        "cache_lengths": CACHE_LENGTHS,
        "heads": HEADS,
        "drift_steps": DRIFT_STEPS,
        "drift_lengths": DRIFT_LENGTHS,
    },
)

# %% [markdown]
# ## 1. The reference in float32 / bfloat16

# %%
ref = error_sweep(CACHE_LENGTHS, HEADS, ("float32", "bfloat16"))
ref.to_csv(f"{RESULTS}/reference_errors.csv", index=False)
print(ref.pivot_table(index="cache_length", columns=["state_dtype", "num_v_heads"], values="rel_rmse_out"))

# %% [markdown]
# ## 2. The Helion kernel
# On the CPU the kernel body runs through Helion's interpreter at small sizes (its fp32 arithmetic
# is PyTorch's, so this checks logic, not GPU numerics). GPU numerics come from the H200 run.

# %%
import functools

from replayssm_kernels import helion_fused_recurrent_kda_replayssm_decode

device = "cuda" if torch.cuda.is_available() else "cpu"
kern = []
for precision in ("fast", "precise"):
    fn = functools.partial(helion_fused_recurrent_kda_replayssm_decode, precision=precision)
    lengths = [L for L in CACHE_LENGTHS if L <= 16]
    kern.append(error_sweep(lengths, HEADS[:2], ("float32",), replay_fn=fn, label=f"helion-{precision}", device=device))
kern = pd.concat(kern, ignore_index=True)
kern.to_csv(f"{RESULTS}/kernel_errors_{device}.csv", index=False)
plot_error_sweep(pd.concat([ref, kern], ignore_index=True), path=f"{RESULTS}/error_vs_cache_length.png")

# %%
from replayssm_kernels import plots

if RUN_GPU_CHECK and torch.cuda.is_available():
    from replayssm_kernels.gpu_check import main as gpu_check

    gpu_check(["--out", "results/gpu_check"])
gpu = pd.read_csv("results/gpu_check/kernel_errors.csv", keep_default_na=False)
print(plots.errors_markdown(gpu))
plots.plot_kernel_errors(gpu, path=f"{RESULTS}/h200_kernel_errors.png")

# %% [markdown]
# ## 3. Long-horizon drift
# If replay added error of its own, the ReplaySSM curves would climb above the standard decode's.
# The ring is a different association of the same products, not an approximation, so short rings
# track the recurrence; long rings sum more terms (and larger decay exponents) per rebuild, which is
# where any extra error shows. The table below gives median and max per curve.

# %%
drift = drift_sweep(DRIFT_STEPS, DRIFT_LENGTHS)
drift.to_csv(f"{RESULTS}/drift.csv", index=False)
print(drift.groupby(["impl", "cache_length"]).rel_err_out.agg(["median", "max"]))
plot_drift(drift, path=f"{RESULTS}/drift.png")
