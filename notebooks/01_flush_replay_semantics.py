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
# it, applies the delta rule and writes it back **every token**. ReplaySSM keeps the state only as a
# **checkpoint** `S0` plus a short **ring** of the last tokens' delta `d` (a `V` vector), key `k` and
# per-channel log decay `g` (`K` vectors). Each step rebuilds what it needs from `S0` and the ring,
# emits the output, and appends the token, or, when the ring is full (a *natural* flush at cursor
# `L-1`) or when asked (a *forced* flush), folds everything into a new checkpoint.
#
# Gated DeltaNet (GDN) is the same with one log decay per value head instead of one per key channel:
# its ring entry is smaller (`g` is one number), so its traffic model allows more.
#
# This notebook steps a tiny example through `ReplaySSMCache` and the ReplaySSM step of `GATE` beside
# the standard recurrence, then plots the traffic model of each gate in `GATES`. It writes to
# `results/cpu/semantics/`.

# %% tags=["parameters"]
import os

SMOKE = os.environ.get("REPLAYSSM_SMOKE") == "1"  # CI: a quick run that writes to a temporary folder
BATCH, H, HV, K, V, L = 2, 1, 2, 8, 8, 4
STEPS = 14
FORCED = {5: [1]}  # step -> rows forced to flush there
GATE = "kda"  # the stepped example's gate: "kda" or "gdn" (replayssm_ref.gates)
GATES = ["kda", "gdn"]  # traffic models drawn
GATE_HEADS = {"kda": (32, 32), "gdn": (16, 32)}  # (H, HV) of each model: Kimi's and Qwen3-Next's

# %%
import tempfile
from pathlib import Path

import pandas as pd

from replayssm_kernels.tools.envinfo import write_env_json
from replayssm_ref.figures import RESULTS, bytes_model_frame, plot_bytes_model, plot_ring_occupancy, semantics_trace
from replayssm_ref.harness import Problem
from replayssm_ref.traffic import TrafficShape

OUT = Path(tempfile.mkdtemp()) if SMOKE else RESULTS / "cpu" / "semantics"
write_env_json(OUT / "env.json", config={"command": "notebooks/01_flush_replay_semantics.py", "steps": STEPS})
problem = Problem(BATCH, H, HV, K, V, L, spare_slots=0)

# %% [markdown]
# ## Step through a sequence
# Row 0 only flushes naturally (every `L` steps); row 1 is forced to flush at step 5, which shifts its
# cycle. `entries_after` is the cursor after `advance_write_pos`. `state_max_abs_err` compares
# `materialize_state` (checkpoint + ring) with the standard recurrence's state: float64 rounding.

# %%
trace, cache = semantics_trace(problem, STEPS, forced=FORCED, gate=GATE)
pd.set_option("display.width", 140)
print(trace.pivot(index="step", columns="row", values=["cursor", "event", "entries_after"]))
print("worst |materialize_state - standard state|:", trace.state_max_abs_err.max())
print("worst |out - standard out|:", trace.out_max_abs_err.max())
trace.to_csv(OUT / "trace.csv", index=False)

# %%
_ = plot_ring_occupancy(trace, L, path=OUT / "ring_occupancy.png")

# %% [markdown]
# ## Why it saves memory traffic
# Per row, value head and step, with state element size `s_S` and a ring entry of
# `E = V·s_d + 4K + K·s_k/hpq` bytes, the cycle average is `V·K·s_S·(1 + 1/L) + E·(L/2 + 1/2 − 1/L)`
# against `2·V·K·s_S` for standard decode: the checkpoint is read every step but written once per
# cycle, while the ring replay grows with `L`. The optimum is near `L* = sqrt(2(V·K·s_S − E)/E)`.
# A leaner ring format (`replayssm_ref.formats`) shrinks `E`: keys stored pre-decayed per value head
# with one prefix sum read per step (`predecayed`, bounded gate).
# GDN's entry holds one gate value (`4K` becomes `4`).

# %%
frames = []
for gate in GATES:
    h, hv = GATE_HEADS[gate]
    shape = TrafficShape(h, hv, 128, 128, gate=gate)
    frame = bytes_model_frame([1, 2, 4, 8, 16, 32], shape, ring_formats=["raw", "predecayed"])
    frames.append(frame.assign(num_q_heads=h, num_v_heads=hv))
    suffix = "" if gate == "kda" else f"_{gate}"
    _ = plot_bytes_model(frame, path=OUT / f"bytes_model{suffix}.png", title=f"{gate.upper()}, H={h}, HV={hv}, K=V=128")
model = pd.concat(frames, ignore_index=True)
print(model.pivot_table(index="cache_length", columns=["gate", "state_dtype", "ring_format"], values="bytes_per_row"))
model.to_csv(OUT / "bytes_model.csv", index=False)
