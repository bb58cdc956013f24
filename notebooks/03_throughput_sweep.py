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
# # Throughput: ReplaySSM vs standard decode vs the copy ceiling, by ring length and batch
#
# Reads each device's sweep, `results/<device>/bench/decode_throughput.csv` (made by
# `python -m replayssm_kernels.tools.bench --plan replayssm_kernels/sweeps/full.json`, with its
# `env.json`), for KDA and, where the sweep has them, Gated DeltaNet (`GATES`). On a GPU, set
# `RERUN_SWEEP = True` to measure this machine first.

# %% tags=["parameters"]
import os

SMOKE = os.environ.get("REPLAYSSM_SMOKE") == "1"
RERUN_SWEEP = False
SWEEP_ARGS = ["--plan", "replayssm_kernels/sweeps/full.json", "--max-sets", "16", "--rep-ms", "30",
              "--ring-formats", "raw", "predecayed"]  # fmt: skip
GATES = ["kda", "gdn"]  # the sweep's KDA and Gated DeltaNet rows, where it has them

# %%
import pandas as pd
import torch

from replayssm_kernels.configs import device_key
from replayssm_kernels.tools import plots
from replayssm_ref.figures import RESULTS

if RERUN_SWEEP and torch.cuda.is_available() and not SMOKE:
    from replayssm_kernels.tools.bench import main as bench

    out = RESULTS / device_key("cuda") / "bench"
    bench([*SWEEP_ARGS[:1], str(RESULTS.parent / SWEEP_ARGS[1]), *SWEEP_ARGS[2:], "--out", str(out)])
folders = plots.device_folders()
print([f.name for f in folders])

# %% [markdown]
# ## Speedup over our standard decode, by ring length and batch, per gate


# %%
def sweeps():
    """(sweep, GPU, gate) for every device folder and every gate of GATES it has rows of."""
    for folder in folders:
        csv = folder / "bench" / "decode_throughput.csv"
        df = plots.load_bench(csv)
        for gate in plots.gates_of(df):
            if gate in GATES:
                yield df, plots.gpu_name(csv), gate


for df, gpu, gate in sweeps():
    plots.plot_speedup(df, gpu, gate=gate)

# %% [markdown]
# ## The regime map: where ReplaySSM wins, by batch and ring length
# Each cell is the fastest ring format's speedup over our standard decode (green: faster).

# %%
for df, gpu, gate in sweeps():
    plots.plot_regime(df, gpu, gate=gate)

# %% [markdown]
# ## Bandwidth per ring format: how close to the copy ceiling (each format's own bytes model)

# %%
for df, gpu, gate in sweeps():
    plots.plot_bandwidth(df, gpu, gate=gate)

# %% [markdown]
# ## The headline tables

# %%
pd.set_option("display.width", 160)
for df, gpu, gate in sweeps():
    print(gpu, gate)
    print(plots.headline_markdown(df, gate))
    print(plots.batches_markdown(df, gate))
