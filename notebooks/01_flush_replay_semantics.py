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
# # ReplaySSM: what is stored, what is rebuilt, and when the checkpoint is written
#
# A KDA layer carries a state `S` of shape `[HV, V, K]` per request. Standard decode reads it, decays
# it, applies the delta rule and writes it back **every token**: `2·V·K` state elements of traffic per
# value head and step.
#
# ReplaySSM keeps the state only as a **checkpoint** `S0`, plus a short **ring** of the last few
# tokens' `(d, k, g)`: the delta `d = u` (a `V` vector), the key `k` and the per-channel log decay
# `g` (both `K` vectors). Each step it rebuilds what it needs of the current state from `S0` and the
# ring, emits the output, and either appends the new token to the ring or, when the ring is full (a
# *natural* flush at cursor `L-1`) or when asked (a *forced* flush), folds everything into a new
# checkpoint. A ring entry is far smaller than the state, so most steps read `S0` once and write one
# entry instead of reading and writing the whole state.
#
# This notebook steps a tiny example through `ReplaySSMCache` and `replayssm_decode_step` beside the
# standard recurrence.

# %% tags=["parameters"]
import os

SMOKE = os.environ.get("REPLAYSSM_SMOKE") == "1"
BATCH, H, HV, K, V, L = 2, 1, 2, 8, 8, 4
STEPS = 12 if SMOKE else 14
FORCED = {5: [1]}  # step -> rows forced to flush there
RESULTS = "results/semantics" + ("/_smoke" if SMOKE else "")

# %%
from pathlib import Path

import pandas as pd

from replayssm_kernels.envinfo import write_env_json
from replayssm_ref.figures import bytes_model_frame, plot_bytes_model, plot_ring_occupancy, semantics_trace
from replayssm_ref.harness import Problem

write_env_json(
    Path(RESULTS) / "env.json",
    config={
        "command": "python notebooks/01_flush_replay_semantics.py",
        "smoke": SMOKE,
        "steps": STEPS,
        "forced": FORCED,
    },
)
problem = Problem(BATCH, H, HV, K, V, L, spare_slots=0)

# %% [markdown]
# ## Step through a sequence
# Row 0 only ever flushes naturally (every `L` steps); row 1 is forced to flush at step 5, which
# shifts its cycle. `entries_after` is the cursor the caller holds after `advance_write_pos`.
# `state_max_abs_err` compares `materialize_state` (checkpoint + ring) with the standard recurrence's
# state after the same step: it stays at float64 rounding.

# %%
trace, cache = semantics_trace(problem, STEPS, forced=FORCED)
pd.set_option("display.width", 140)
print(trace.pivot(index="step", columns="row", values=["cursor", "event", "entries_after"]))
print("worst |materialize_state - standard state|:", trace.state_max_abs_err.max())
print("worst |out - standard out|:", trace.out_max_abs_err.max())
trace.to_csv(f"{RESULTS}/trace.csv", index=False)

# %%
plot_ring_occupancy(trace, L, path=f"{RESULTS}/ring_occupancy.png")

# %% [markdown]
# ## Why it saves memory traffic
# Per row, value head and step, with state element size `s_S` and a ring entry of
# `E = V·s_d + 4K + K·s_k/hpq` bytes, the cycle average is
# `V·K·s_S·(1 + 1/L) + E·(L/2 + 1/2 − 1/L)` against `2·V·K·s_S` for standard decode: the checkpoint is
# read every step but written once per cycle, while the ring replay grows with `L`. The optimum sits
# near `L* = sqrt(2(V·K·s_S − E)/E)`: about 11 for fp32 state and 8 for bf16 state at K=V=128.

# %%
model = bytes_model_frame([1, 2, 4, 8, 16, 32, 64])
print(model.pivot_table(index="cache_length", columns="state_dtype", values="bytes_per_row"))
plot_bytes_model(model, path=f"{RESULTS}/bytes_model.png")
