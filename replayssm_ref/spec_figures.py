"""Sweeps and figures of notebook 04 (speculative decoding), on the reference or any implementation
with its signatures. As in ``replayssm_ref.figures``: sweeps return tidy frames, ``plot_*`` draw one
figure each, save it where given a path and return it."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import pandas as pd
import torch

from .cache import ReplaySSMCache
from .figures import finish, log2_x
from .harness import DTYPES, Problem, random_state, random_token, random_weights, tolerance
from .spec import replayssm_spec_commit, replayssm_spec_verify
from .spec_harness import random_path, random_tree, run_spec_rounds
from .traffic import TrafficShape, spec_round_bytes


def spec_trace(p: Problem, num_drafts: int, rounds: int, *, tree: bool = True, seed: int = 0) -> pd.DataFrame:
    """One row per (round, row): the cursor before the round, the drafts' parents, the accepted path,
    whether the commit folded, and the cursor after. Float64 reference, random trees and paths."""
    gen = torch.Generator().manual_seed(seed)
    f64, T, L = torch.float64, num_drafts, p.cache_length
    w = random_weights(p, gen, "cpu", f64)
    S = random_state(p, gen, torch.arange(p.batch), "cpu", f64)
    cache = ReplaySSMCache.allocate(num_slots=p.num_slots, batch=p.batch, num_q_heads=p.num_q_heads,
                                    num_v_heads=p.num_v_heads, key_dim=p.key_dim, value_dim=p.value_dim,
                                    cache_length=L, cache_dtype=f64)  # fmt: skip
    rings = (cache.d_cache, cache.k_cache, cache.g_cache)
    idx = torch.arange(p.batch, dtype=torch.int32)
    out = torch.empty(p.batch, T, p.num_v_heads, p.value_dim, dtype=f64)
    rows = []
    for r in range(rounds):
        drafts = [random_token(p, gen, "cpu", f64) for _ in range(T)]
        mixed, a, b = (torch.stack([d[i] for d in drafts], 1) for i in range(3))
        parents = random_tree(p.batch, T, gen) if tree else None
        c = cache.write_pos.clone()
        replayssm_spec_verify(mixed, a, b, w.A_log, w.dt_bias, w.scale, S, *rings, out, idx, cache.write_pos,
                              parents, True)  # fmt: skip
        chain = torch.arange(T, dtype=torch.int32).expand(p.batch, T) - 1
        n, nodes = random_path(parents if tree else chain, gen, T)
        replayssm_spec_commit(S, *rings, idx, cache.write_pos, n, nodes if tree else None, num_drafts=T)
        for row in range(p.batch):
            k = int(n[row])
            rows.append({"round": r, "row": row, "cursor": int(c[row]), "accepted": k,
                         "parents": (parents if tree else chain)[row].tolist(), "path": nodes[row, :k].tolist(),
                         "folded": int(cache.write_pos[row]) == 0 and int(c[row]) + k > 0,
                         "cursor_after": int(cache.write_pos[row])})  # fmt: skip
    return pd.DataFrame(rows)


def plot_spec_occupancy(trace: pd.DataFrame, cache_length: int, num_drafts: int, path=None):
    """Committed ring entries per row over rounds, with the drafts' window drawn above and folds marked."""
    fig, ax = plt.subplots(figsize=(10, 3.4))
    for r, g in trace.groupby("row"):
        ax.step(g["round"], g.cursor_after, where="post", label=f"row {r}", color=f"C{r}")
        ax.bar(g["round"] + 0.15 * r - 0.1, num_drafts, bottom=g.cursor, width=0.12, color=f"C{r}", alpha=0.25)
        f = g[g.folded]
        ax.plot(f["round"], f.cursor_after, "kv", ms=8, ls="none", label="fold" if r == 0 else None)
    ax.axhline(cache_length, color="grey", ls=":", lw=1, label="L")
    ax.set_xlabel("round (verify + commit)")
    ax.set_ylabel("ring entries")
    ax.set_title("Committed entries (lines) and each verify's T drafts past them (bars); a commit folds when "
                 "the next window would not fit", fontsize=9)  # fmt: skip
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return finish(fig, path)


def spec_error_sweep(
    drafts, dtypes=("float32", "bfloat16"), *, trees=(False, True), cache_length=16, rounds=8, verify_fn=None,
    commit_fn=None, label="reference", device="cpu", heads=(2, 4), dims=(16, 32), seed=0,
) -> pd.DataFrame:  # fmt: skip
    """Worst verify-output and committed-state error against the float64 recurrence per (T, draft
    shape, state dtype), over ``rounds`` rounds."""
    rows = []
    for T, tree, name in itertools.product(drafts, trees, dtypes):
        p = Problem(4, heads[0], heads[1], dims[0], dims[1], max(cache_length, T))
        kw = {k: v for k, v in (("verify_fn", verify_fn), ("commit_fn", commit_fn)) if v is not None}
        r = run_spec_rounds(p, num_drafts=T, rounds=rounds, tree=tree, seed=seed + T, state_dtype=DTYPES[name],
                            device=device, **kw)  # fmt: skip
        rows.append({"impl": label, "num_drafts": T, "shape": "tree" if tree else "chain", "state_dtype": name,
                     "rel_err_out": r.out_rel, "rel_err_state": r.state_rel, "folds": r.folds,
                     "tolerance": tolerance(DTYPES[name], steps=rounds * T), "ok": r.untouched_ok and r.cursors_ok,
                     "finite": not r.nonfinite})  # fmt: skip
    return pd.DataFrame(rows)


def plot_spec_errors(frame: pd.DataFrame, path=None):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, col, title in zip(axes, ("rel_err_out", "rel_err_state"), ("verify outputs", "committed states"),
                              strict=True):  # fmt: skip
        for (impl, shape, sd), g in frame.groupby(["impl", "shape", "state_dtype"]):
            ax.plot(g.num_drafts, g[col].clip(lower=1e-17), "o-" if shape == "chain" else "s--",
                    label=f"{impl}, {shape}, {sd}")  # fmt: skip
        for tol in frame.groupby("state_dtype").tolerance.max():
            ax.axhline(tol, ls=":", lw=0.8, color="grey")
        log2_x(ax, frame.num_drafts, label="drafts per round T")
        ax.set_yscale("log")
        ax.set_title(title)
    axes[0].set_ylabel("worst ‖x − ref‖/‖ref‖")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle("Speculative rounds against single-token float64 decode")
    return finish(fig, path)


def spec_model_frame(drafts=(2, 4, 8), cache_length=16, accept_rate=0.6, rounds=64, batch=64) -> pd.DataFrame:
    """The bytes model per round (``traffic.spec_round_bytes``), ReplaySSM and snapshots, per T and
    state dtype, over a seeded Binomial(T, accept_rate) schedule."""
    rows = []
    for T, (name, sb) in itertools.product(drafts, (("float32", 4), ("bfloat16", 2))):
        gen = torch.Generator().manual_seed(T)
        accepts = (torch.rand(batch, rounds, T, generator=gen) < accept_rate).sum(-1).tolist()
        b = spec_round_bytes(TrafficShape(32, 32, 128, 128, state_bytes=sb), cache_length, T, accepts)
        rows.append({"num_drafts": T, "state_dtype": name, "replayssm_bytes": b["replayssm"],
                     "snapshot_bytes": b["snapshot"], "model_speedup": b["snapshot"] / b["replayssm"]})  # fmt: skip
    return pd.DataFrame(rows)
