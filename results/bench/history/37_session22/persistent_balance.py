"""Run 37, offline: how a persistent grid deals the state launch's flush items to its programs, under
the benchmark's cursors (run here, from the repository root; no GPU):

    python results/bench/history/37_session22/persistent_balance.py

The two-launch state launch at the L=16 entries (K = V = 128, V tile 64, HV = 32, batch 256) has one
work item per (row, head, V tile), numbered as Helion 1.5.0's generated code numbers them (row fastest,
then head, then V tile: ``inspect_codegen --dump``). A flat grid gives each item its own program and the
hardware hands programs to SMs as they free up. A persistent grid of ``132 x M`` programs (an H100's or
H200's SMs) gives each program a fixed set: ``persistent_interleaved`` the items ``p, p + N, p + 2N, ...``,
``persistent_blocked`` a run of ``ceil(items / N)`` consecutive ones. For each step of a cycle a row is
flushing where ``bench.cursor_schedule`` puts its cursor at L - 1, in the regular order (``row % L``) or
shuffled (seed 0). Per grid, M and order, over the cycle's steps: the most items and the most flushing
items one program gets, and the mean flushing items a program gets.

``critical_over_mean`` is a proxy for the launch's length against a balanced one: the most work one
program gets over the mean, counting a flushing item as ``r`` non-flushing ones, with ``r`` the ratio of
an all-flush state launch to a no-flush one in Nsight Compute (``../35_*/ncu_summary.csv``, the entry's
rows from run 34, per state dtype). Where it is well above 1, some programs run on after the rest have
finished, with the SM nearly empty. A model, not a measurement. Writes ``persistent_balance.csv`` and
``persistent_balance.env.json`` (the machine and versions it ran with; no GPU needed).
"""

import math
import sys
from pathlib import Path

import pandas as pd
import torch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[3]))
from replayssm_kernels.bench import cursor_schedule  # noqa: E402
from replayssm_kernels.envinfo import write_env_json  # noqa: E402

B, HV, V, BV, L, NUM_SM = 256, 32, 128, 64, 16, 132
ITEMS = B * HV * (V // BV)
ncu = pd.read_csv(HERE / "../35_session20/ncu_summary.csv")
entry = ncu[ncu.flush_keep == 0].set_index(["state_dtype", "cursors"]).duration_us
RATIO = {sd: entry[sd, "all"] / entry[sd, "none"] for sd in ("float32", "bfloat16")}


def programs(pid_type: str, n: int) -> list[torch.Tensor]:
    """The item numbers each of ``n`` programs runs."""
    if pid_type == "persistent_interleaved":
        return [torch.arange(p, ITEMS, n) for p in range(n)]
    size = math.ceil(ITEMS / n)
    return [torch.arange(min(p * size, ITEMS), min((p + 1) * size, ITEMS)) for p in range(n)]


rows = []
for pid_type in ("persistent_interleaved", "persistent_blocked"):
    for mult in (4, 6, 7, 8, 10):
        owned = programs(pid_type, NUM_SM * mult)
        for order, seed in (("regular", None), ("shuffled", 0)):
            most_flush, mean_flush, critical = 0, 0.0, {sd: 0.0 for sd in RATIO}
            for wp in cursor_schedule(B, L, "cpu", seed):
                flushing = (wp == L - 1)[torch.arange(ITEMS) % B]  # the row of an item is its number mod B
                count = torch.tensor([int(flushing[items].sum()) for items in owned])
                sizes = torch.tensor([len(items) for items in owned])
                most_flush, mean_flush = max(most_flush, int(count.max())), mean_flush + float(count.float().mean()) / L
                for sd, r in RATIO.items():
                    work = sizes + (r - 1) * count
                    critical[sd] = max(critical[sd], float(work.max() / work.float().mean()))
            rows.append(
                dict(
                    pid_type=pid_type, num_sm_multiplier=mult, programs=NUM_SM * mult, cursors=order,
                    most_items=max(len(items) for items in owned), most_flush_items=most_flush,
                    mean_flush_items=round(mean_flush, 2),
                    **{f"critical_over_mean_{sd}": round(c, 2) for sd, c in critical.items()},
                )
            )  # fmt: skip
out = pd.DataFrame(rows)
out.to_csv(HERE / "persistent_balance.csv", index=False)
config = {"command": "python results/bench/history/37_session22/persistent_balance.py", "flush_cost_ratio": RATIO}
write_env_json(HERE / "persistent_balance.env.json", config=config | {"num_sm": NUM_SM, "items": ITEMS})
print(f"flush / no-flush item cost (Nsight Compute, run 34): {RATIO}")
print(out.to_string(index=False))
