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
# # Correctness: error against the float64 reference, by ring length and head count
#
# 1. The eager reference in float32 and bfloat16 (state and rings) against the float64 standard
#    recurrence, by gate (KDA, Gated DeltaNet), ring length `L`, head count `HV` and ring format (written
#    to `results/cpu/correctness/`).
# 2. The Helion kernel on this machine: on a GPU when there is one, else through `HELION_INTERPRET=1`
#    at small sizes; and the committed GPU checks of `results/<device>/gpu_check/`.
# 3. Long-horizon drift: output error per step over thousands of steps, standard decode vs ReplaySSM.
#
# Errors are the worst per (row, value head); dashed lines are the tolerances the tests use.

# %% tags=["parameters"]
import os

SMOKE = os.environ.get("REPLAYSSM_SMOKE") == "1"  # CI: a quick run that writes to a temporary folder
CACHE_LENGTHS = [1, 2, 4] if SMOKE else [1, 2, 4, 8, 16, 32, 64]
HEADS = [(1, 1), (2, 4)] if SMOKE else [(1, 1), (2, 4), (4, 16)]  # (H, HV)
KERNEL_LENGTHS = [4] if SMOKE else [1, 4, 8, 16]
DRIFT_STEPS = 64 if SMOKE else 4096
DRIFT_LENGTHS = [1, 8] if SMOKE else [1, 8, 64]
RING_FORMATS = ["raw", "predecayed"]  # replayssm_ref.formats
LOWER_BOUND = -5.0  # KDA's bounded gate (the predecayed format needs it; None: softplus, which it cannot hold)
GATES = ["kda", "gdn"]  # KDA, and Gated DeltaNet (its softplus per-head gate, raw rings)

# %%
import tempfile
from pathlib import Path

import pandas as pd
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("HELION_INTERPRET", "1")  # the kernels run as eager PyTorch on the CPU

from replayssm_kernels import helion_fused_recurrent_gdn_replayssm_decode, helion_fused_recurrent_kda_replayssm_decode
from replayssm_kernels.tools import plots
from replayssm_kernels.tools.envinfo import write_env_json
from replayssm_ref.figures import RESULTS, drift_sweep, error_sweep, plot_drift, plot_error_sweep

OUT = Path(tempfile.mkdtemp()) if SMOKE else RESULTS / "cpu" / "correctness"
write_env_json(
    OUT / "env.json",
    config={
        "command": "notebooks/02_correctness_sweep.py",
        "cache_lengths": CACHE_LENGTHS,
        "heads": HEADS,
        "gates": GATES,
        "ring_formats": RING_FORMATS,
        "lower_bound": LOWER_BOUND,
    },
)

# %% [markdown]
# ## 1. The reference in float32 and bfloat16

# %%
ref = error_sweep(
    CACHE_LENGTHS, HEADS, ("float32", "bfloat16"), ring_formats=RING_FORMATS, lower_bound=LOWER_BOUND, gates=GATES
)
ref.to_csv(OUT / "reference_errors.csv", index=False)
worst = ref.pivot_table(
    index="cache_length", columns=["gate", "state_dtype", "ring_format"], values="rel_err_out", aggfunc="max"
)
print(worst)

# %% [markdown]
# ## 2. The Helion kernel, here
# On a CPU the kernel bodies run through Helion's interpreter (PyTorch's fp32 arithmetic: this checks
# logic, not GPU numerics); the GPU checks below are the GPU numerics.

# %%
device = "cuda" if torch.cuda.is_available() else "cpu"
kernels = {"kda": helion_fused_recurrent_kda_replayssm_decode, "gdn": helion_fused_recurrent_gdn_replayssm_decode}
kern = error_sweep(
    KERNEL_LENGTHS, HEADS[:2], ("float32",), replay_fn=kernels, label="helion", device=device,
    ring_formats=RING_FORMATS, lower_bound=LOWER_BOUND, gates=GATES,
)  # fmt: skip
_ = plot_error_sweep(pd.concat([ref, kern], ignore_index=True), path=OUT / "error_vs_cache_length.png")

# %% [markdown]
# ## The committed GPU checks (`python -m replayssm_kernels.tools.gpu_check`)

# %%
for errors in sorted(RESULTS.glob("*/gpu_check/kernel_errors.csv")):
    err = plots.load_errors(errors)
    print(errors.parent.parent.name, f"{err.passed.astype(str).eq('True').sum()} of {len(err)} runs passed")
    plots.plot_kernel_errors(err, plots.gpu_name(errors))

# %% [markdown]
# ## 3. Long-horizon drift
# If replay added error of its own, the ReplaySSM curves would climb above the standard decode's.

# %%
drift = drift_sweep(DRIFT_STEPS, DRIFT_LENGTHS)
drift.to_csv(OUT / "drift.csv", index=False)
print(drift.groupby(["impl", "cache_length"]).rel_err_out.agg(["median", "max"]))
_ = plot_drift(drift, path=OUT / "drift.png")
