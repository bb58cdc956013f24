"""``python -m replayssm_kernels.tools.spec_bench``: speculative decoding rounds, ReplaySSM vs snapshots.

Per case (batch, drafts T, chain or binary tree, state dtype; HV = H = 32, K = V = 128, bf16 rings and
inputs, ring length ``--cache-length``), in one process on one GPU, each timed as a CUDA graph of
``--rounds`` rounds over rotated slot sets (pools larger than L2):

* ``replayssm_spec``   our verify from checkpoint + ring, then our commit (cursor moves; folds when the
                       next window would not fit), ``replayssm_kernels.spec``
* ``snapshot_spec``    our snapshot verify (a state per draft), then the scatter of the accepted one
* ``sglang_commit``    sglang's Triton KDA commit alone (it folds every round's accepted drafts; chains
                       only): the peer of our commit half, beside ``replayssm_commit`` (our commit alone)
* ``fla_multi_token``  FLA's ``fused_recurrent_kda`` over the T drafts as one sequence (chains only):
                       reads and writes the state once, no per-draft states, so not a verify; a floor

Accept counts per row and round are drawn once (seeded) from Binomial(T, ``--accept-rate``), capped by
the tree's depth, and shared by every implementation; the bytes model (``replayssm_ref.traffic.
spec_round_bytes``) averages the same schedule. Writes ``spec_rounds.csv`` and ``env.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import sys
from pathlib import Path

import torch

from replayssm_ref.harness import DTYPES, Problem, random_token, random_weights
from replayssm_ref.spec import chain_parents
from replayssm_ref.spec_harness import binary_tree
from replayssm_ref.traffic import TrafficShape, spec_round_bytes

from . import peers
from .bench import measure_copy_gbps, time_graph

IMPLS = ("replayssm_spec", "snapshot_spec", "replayssm_commit", "sglang_commit", "fla_multi_token")
MODEL = {"replayssm_spec": "replayssm", "snapshot_spec": "snapshot", "sglang_commit": "peer_commit"}
CSV_COLUMNS = [
    "impl", "batch", "num_q_heads", "num_v_heads", "key_dim", "value_dim", "cache_length", "num_drafts", "tree",
    "state_dtype", "accept_rate", "mean_accepted", "us_per_round", "us_p20", "us_p80", "model_bytes_per_round",
    "gbps_effective", "copy_gbps", "frac_of_copy", "rounds_per_graph", "slot_sets", "device",
]  # fmt: skip


def tree_depth(parents: torch.Tensor) -> int:
    """The longest root-to-leaf path of ``parents [T]``."""
    depth = []
    for p in parents.tolist():
        depth.append(1 if p < 0 else depth[p] + 1)
    return max(depth)


def accept_schedule(batch: int, rounds: int, T: int, rate: float, cap: int, seed: int = 0) -> torch.Tensor:
    """``[rounds, batch]`` int32 accept counts from Binomial(T, rate), capped at ``cap``."""
    gen = torch.Generator().manual_seed(seed)
    n = (torch.rand(rounds, batch, T, generator=gen) < rate).sum(-1)
    return n.clamp(max=cap).to(torch.int32)


def first_path(parents: torch.Tensor, n: int) -> list[int]:
    """The path of ``n`` drafts from the first root down the first children (a binary tree's leftmost)."""
    path, prev = [], -1
    for _ in range(n):
        prev = int((parents == prev).nonzero()[0])
        path.append(prev)
    return path


class SpecWorkload:
    """Pools, rings and per-round inputs of one case; the graphs' round closures per implementation."""

    def __init__(self, B, T, tree, state_dtype, L, sets, rounds, rate, device, heads=32, dim=128):
        self.B, self.T, self.tree, self.L, self.sets, self.rounds = B, T, tree, L, sets, rounds
        p = Problem(B, heads, heads, dim, dim, L, 0)
        gen = torch.Generator().manual_seed(0)
        slots = B * sets
        sd, HV, K, V = DTYPES[state_dtype], heads, dim, dim
        self.state = (torch.randn(slots, HV, V, K, device=device) * 0.1).to(sd)
        self.d = torch.zeros(slots, HV, L, V, device=device, dtype=torch.bfloat16)
        self.k = torch.zeros(slots, heads, L, K, device=device, dtype=torch.bfloat16)
        self.g = torch.zeros(slots, HV, L, K, device=device)
        self.write_pos = [torch.zeros(B, device=device, dtype=torch.int32) for _ in range(sets)]
        self.w = random_weights(p, gen, device, torch.float32)
        drafts = [[random_token(p, gen, device, torch.bfloat16) for _ in range(T)] for _ in range(2)]
        self.drafts = [tuple(torch.stack([d[i] for d in ds], 1) for i in range(3)) for ds in drafts]
        self.parents = (binary_tree(B, T) if tree else chain_parents(B, T)).to(device)
        depth = tree_depth(self.parents[0].cpu()) if tree else T
        self.accepts = accept_schedule(B, rounds, T, rate, depth).to(device)
        self.nodes = None
        if tree:  # the leftmost path, cut at each row's count
            path = first_path(self.parents[0].cpu(), depth) + [-1] * (T - depth)
            self.nodes = torch.tensor(path, dtype=torch.int32, device=device).expand(B, T).contiguous()
        self.indices = [torch.arange(s * B, (s + 1) * B, device=device, dtype=torch.int32) for s in range(sets)]
        self.out = torch.empty(B, T, HV, V, device=device, dtype=torch.bfloat16)
        self.snapshots = None

    def round_fns(self, impl: str, peer=None):
        """One zero-argument closure per (slot set, round): the launches of that round."""
        from .. import spec

        fns = []
        for s, r in itertools.product(range(self.sets), range(self.rounds)):
            idx, wp, n = self.indices[s], self.write_pos[s], self.accepts[r]
            mixed, a, b = self.drafts[r % 2]
            w, rings = self.w, (self.d, self.k, self.g)
            verify = functools.partial(
                spec.helion_kda_replayssm_spec_verify, mixed, a, b, w.A_log, w.dt_bias, w.scale, self.state, *rings,
                self.out, idx, wp, self.parents if self.tree else None, True, None, check_values=False,
            )  # fmt: skip
            commit = functools.partial(
                spec.helion_kda_replayssm_spec_commit, self.state, *rings, idx, wp, n, self.nodes, None,
                num_drafts=self.T, check_values=False,
            )  # fmt: skip
            if impl == "replayssm_spec":
                fns.append(_both(verify, commit))
            elif impl == "replayssm_commit":
                fns.append(commit)
            elif impl == "snapshot_spec":
                if self.snapshots is None:
                    self.snapshots = torch.empty(self.B, self.T, *self.state.shape[1:], device=self.state.device,
                                                 dtype=self.state.dtype)  # fmt: skip
                sv = functools.partial(
                    spec.helion_kda_snapshot_spec_verify, mixed, a, b, w.A_log, w.dt_bias, w.scale, self.state,
                    self.out, idx, self.snapshots, self.parents if self.tree else None, True, None,
                    check_values=False,
                )  # fmt: skip
                sc = functools.partial(spec.helion_kda_snapshot_spec_commit, self.state, self.snapshots, idx, n,
                                       self.nodes)  # fmt: skip
                fns.append(_both(sv, sc))
            elif impl == "sglang_commit":
                beta = torch.zeros(self.state.shape[0], self.state.shape[1], self.L, device=self.state.device)
                fns.append(functools.partial(peer, self.state, self.d, self.k, self.g, beta, idx, n, self.L,
                                             self.k.shape[1]))  # fmt: skip
            elif impl == "fla_multi_token":
                fns.append(self._fla(mixed, a, b, idx))
        return fns

    def _fla(self, mixed, a, b, idx):
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

        B, T, HV = self.B, self.T, self.state.shape[1]
        K = V = self.state.shape[3]
        H = self.k.shape[1]
        q = mixed[..., : H * K].reshape(1, B * T, H, K)
        k = mixed[..., H * K : 2 * H * K].reshape(1, B * T, H, K)
        v = mixed[..., 2 * H * K :].reshape(1, B * T, HV, V)
        cu = torch.arange(0, B * T + 1, T, device=mixed.device, dtype=torch.long)
        out = self.out.view(1, B * T, HV, V)
        w = self.w

        def run():
            fused_recurrent_kda_fwd(
                q=q, k=k, v=v, g=a.reshape(1, B * T, HV, K), beta=b.reshape(1, B * T, HV), A_log=w.A_log,
                dt_bias=w.dt_bias, initial_state=self.state, scale=w.scale, inplace_final_state=True,
                state_v_first=True, cu_seqlens=cu, ssm_state_indices=idx, use_qk_l2norm_in_kernel=True,
                use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, out=out,
            )  # fmt: skip

        return run


def _both(first, second):
    def run():
        first()
        second()

    return run


def parse_args(argv=None):
    prog = "python -m replayssm_kernels.tools.spec_bench"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[256, 64, 8, 1], help="rows per round")
    ap.add_argument("--drafts", type=int, nargs="+", default=[4, 2, 8], help="drafts per row T")
    ap.add_argument("--trees", nargs="+", choices=["chain", "tree"], default=["chain", "tree"], help="draft shapes")
    ap.add_argument(
        "--state-dtypes", nargs="+", choices=["float32", "bfloat16"], default=["float32", "bfloat16"], help="states"
    )
    ap.add_argument("--cache-length", type=int, default=16, help="ring length L")
    ap.add_argument("--accept-rate", type=float, default=0.6, help="each draft's acceptance probability")
    ap.add_argument("--rounds", type=int, default=16, help="rounds per slot set in a graph")
    ap.add_argument("--max-sets", type=int, default=8, help="cap on rotated slot sets per graph")
    ap.add_argument("--rep-ms", type=int, default=50, help="timing window per case and implementation")
    ap.add_argument("--impls", nargs="+", choices=IMPLS, default=list(IMPLS), help="implementations")
    ap.add_argument("--peers", type=Path, default=peers.DEFAULT_DIR, help="folder of the sglang peer kernel files")
    ap.add_argument("--out", type=Path, required=True, help="folder for spec_rounds.csv and env.json")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    import pandas as pd

    from .envinfo import write_env_json

    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("the benchmark needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    copy_gbps = measure_copy_gbps(device)
    peer = peers.sglang_kda_spec_commit(args.peers)
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python -m replayssm_kernels.tools.spec_bench " + " ".join(argv if argv is not None else sys.argv[1:])
    write_env_json(args.out / "env.json", config={k: str(v) for k, v in vars(args).items()} | {"command": command})
    rows = []
    for B, T, shape, sd in itertools.product(args.batch, args.drafts, args.trees, args.state_dtypes):
        tree = shape == "tree"
        state_head = 128 * 128 * DTYPES[sd].itemsize
        sets = max(1, min(args.max_sets, math.ceil(4 * l2 / (B * 32 * state_head))))
        work = SpecWorkload(B, T, tree, sd, args.cache_length, sets, args.rounds, args.accept_rate, device)
        t = TrafficShape(32, 32, 128, 128, state_bytes=DTYPES[sd].itemsize)
        model = spec_round_bytes(t, args.cache_length, T, work.accepts.T.cpu().tolist())
        for impl in args.impls:
            if impl in ("sglang_commit", "fla_multi_token") and (tree or (impl == "sglang_commit" and peer is None)):
                continue
            if impl == "sglang_commit" and sd != "float32":
                continue  # its checkpoint is fp32
            try:
                med, p20, p80 = time_graph(work.round_fns(impl, peer), rep_ms=args.rep_ms)
            except Exception as exc:  # a failing impl is recorded, not hidden
                print(f"{impl} B={B} T={T} {shape} {sd}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                continue
            nbytes = B * model[MODEL[impl]] if impl in MODEL else float("nan")
            gbps = nbytes / (med * 1e-6) / 1e9
            rows.append({
                "impl": impl, "batch": B, "num_q_heads": 32, "num_v_heads": 32, "key_dim": 128, "value_dim": 128,
                "cache_length": args.cache_length, "num_drafts": T, "tree": tree, "state_dtype": sd,
                "accept_rate": args.accept_rate, "mean_accepted": float(work.accepts.float().mean()),
                "us_per_round": med, "us_p20": p20, "us_p80": p80, "model_bytes_per_round": nbytes,
                "gbps_effective": gbps, "copy_gbps": copy_gbps, "frac_of_copy": gbps / copy_gbps,
                "rounds_per_graph": sets * args.rounds, "slot_sets": sets, "device": props.name,
            })  # fmt: skip
            print(f"{impl:18s} B={B:<3d} T={T} {shape:5s} {sd}: {med:8.2f} us/round", flush=True)
            pd.DataFrame(rows, columns=CSV_COLUMNS).to_csv(args.out / "spec_rounds.csv", index=False)
        del work
        torch.cuda.empty_cache()
    print(f"wrote {args.out / 'spec_rounds.csv'} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
