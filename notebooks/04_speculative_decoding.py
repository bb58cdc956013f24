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
# # Speculative decoding on ReplaySSM: verify from checkpoint + ring, commit by cursor
#
# A round verifies `T` draft tokens per request (a chain, or a tree given by `parents`) and commits the
# drafts the target model accepted. A standard (snapshot) verify writes a full state per draft; the
# ReplaySSM verify rebuilds the committed state from checkpoint + ring, writes each draft's small ring
# entry, and the commit moves a cursor (a tree's accepted path is first made contiguous), folding the
# history into the checkpoint only when the next window would not fit. The contract is in
# `docs/design.md`; the code in `replayssm_ref/spec.py` and `replayssm_kernels/spec.py`.
#
# 1. A worked example: draft trees, accepted paths, ring occupancy over rounds.
# 2. Correctness: error against single-token float64 decode, by `T`, chains and trees.
# 3. Speed: the bytes model, and the measured rounds of `results/<device>/spec/` where a GPU made them.

# %% tags=["parameters"]
import os

SMOKE = os.environ.get("REPLAYSSM_SMOKE") == "1"  # CI: a quick run that writes to a temporary folder
T, L, ROUNDS = 3, 8, 12  # the worked example: drafts per round, ring length, rounds
DRAFTS = [1, 2, 4] if SMOKE else [1, 2, 4, 8]  # the error sweep's T
ERROR_ROUNDS = 4 if SMOKE else 16
TREES = [False, True]  # chains and trees

# %%
import tempfile
from pathlib import Path

import pandas as pd
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("HELION_INTERPRET", "1")  # the kernels run as eager PyTorch on the CPU

from replayssm_kernels.spec import helion_kda_replayssm_spec_commit, helion_kda_replayssm_spec_verify
from replayssm_kernels.tools import plots
from replayssm_kernels.tools.envinfo import write_env_json
from replayssm_ref.figures import RESULTS
from replayssm_ref.harness import Problem
from replayssm_ref.spec_figures import (
    plot_spec_errors,
    plot_spec_occupancy,
    spec_error_sweep,
    spec_model_frame,
    spec_trace,
)

OUT = Path(tempfile.mkdtemp()) if SMOKE else RESULTS / "cpu" / "spec"
write_env_json(OUT / "env.json", config={"command": "notebooks/04_speculative_decoding.py", "drafts": DRAFTS})

# %% [markdown]
# ## 1. A worked example
# Three rows, random draft trees of `T` drafts each round (`parents[t] < t`, `-1` a root), a random
# accepted path per row (0 accepted included). `cursor` is the committed entries before the round; the
# verify wrote the drafts at `cursor .. cursor + T - 1`; the commit kept the accepted path's entries
# (moved to `cursor .. cursor + n - 1`) or folded when `cursor + n + T > L`.

# %%
trace = spec_trace(Problem(3, 1, 2, 8, 8, L), T, ROUNDS)
pd.set_option("display.width", 160)
print(trace[trace.row == 0].to_string(index=False))
_ = plot_spec_occupancy(trace, L, T, path=OUT / "ring_occupancy.png")

# %% [markdown]
# ## 2. Correctness: rounds against single-token float64 decode
# Every round checks the verify's outputs, that it wrote only the drafts' ring positions (stale entries
# are NaN and never leak), the commit's cursor, and the committed state (checkpoint + ring) against the
# float64 recurrence stepped over the accepted drafts only.

# %%
ref = spec_error_sweep(DRAFTS, trees=TREES, rounds=ERROR_ROUNDS)
device = "cuda" if torch.cuda.is_available() else "cpu"
kern = spec_error_sweep(
    DRAFTS[:3], ("float32",), trees=TREES, rounds=3, verify_fn=helion_kda_replayssm_spec_verify,
    commit_fn=helion_kda_replayssm_spec_commit, label="helion", device=device,
)  # fmt: skip
errors = pd.concat([ref, kern], ignore_index=True)
errors.to_csv(OUT / "spec_errors.csv", index=False)
print(errors[["impl", "num_drafts", "shape", "state_dtype", "rel_err_out", "rel_err_state", "ok"]].to_string())
_ = plot_spec_errors(errors, path=OUT / "spec_errors.png")

# %% [markdown]
# ## 3. Speed
# The bytes model per round (acceptance Binomial(T, 0.6), L = 16, fp32 and bf16 state): a snapshot
# verify writes T states and its commit one more; ReplaySSM writes T ring entries and folds now and then.

# %%
model = spec_model_frame()
model.to_csv(OUT / "spec_bytes_model.csv", index=False)
print(model.to_string(index=False))

# %% [markdown]
# Measured on a GPU by `python -m replayssm_kernels.tools.spec_bench --out results/<device>/spec`
# (none where no sweep was committed):

# %%
for csv in sorted(RESULTS.glob("*/spec/spec_rounds.csv")):
    df = plots.load_spec(csv)
    print(plots.spec_markdown(df))
    plots.plot_spec_speedup(df, plots.gpu_name(csv))
