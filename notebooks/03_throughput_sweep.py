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
# # Throughput: ReplaySSM vs standard decode vs the copy ceiling
#
# Reads `results/bench/decode_throughput.csv` (an H200 run of `python -m replayssm_kernels.bench`,
# with its `env.json`). Set `RERUN_SWEEP = True` on a GPU machine to measure again first.

# %% tags=["parameters"]
import os

SMOKE = os.environ.get("REPLAYSSM_SMOKE") == "1"
RERUN_SWEEP = False
SWEEP_ARGS = ["--batch", "256", "--heads", "32", "--gqa", "1", "--cache-lengths", "1", "4", "8", "16"]
CSV = "results/bench/decode_throughput.csv"
RESULTS = "results/bench" + ("/_smoke" if SMOKE else "")

# %%
from pathlib import Path

import pandas as pd
import torch

from replayssm_kernels import plots

Path(RESULTS).mkdir(parents=True, exist_ok=True)
if RERUN_SWEEP and torch.cuda.is_available():
    from replayssm_kernels.bench import main as bench

    bench(SWEEP_ARGS + ["--out", str(Path(CSV).parent)])
df = plots.load_bench(CSV)
print(len(df), "rows;", df.device.iloc[0], "; copy ceiling", round(df.copy_gbps.iloc[0]), "GB/s")

# %%
plots.plot_time_vs_cache_length(df, path=f"{RESULTS}/time_vs_cache_length.png")

# %%
plots.plot_speedup(df, path=f"{RESULTS}/speedup.png")

# %%
plots.plot_bandwidth(df, path=f"{RESULTS}/bandwidth.png")

# %% [markdown]
# ## Best ring length per configuration

# %%
best = plots.best_cache_length(df)
pd.set_option("display.width", 160)
print(best.to_string(index=False))
best.to_csv(f"{RESULTS}/best_cache_length.csv", index=False)
