"""``python -m replayssm_kernels.tools.bench``: decode throughput of ReplaySSM vs standard decode vs the copy limit.

Every implementation runs the same sweep in one process, on the same inputs:

* ``replayssm_helion``     ours, one call per step, the default design (``launches=None``: 2 or 3 by L;
                           at L = 1 the standard kernel on the checkpoint)
* ``replayssm_helion_fused`` ours with ``launches=1``: one launch (GDN, or KDA's predecayed format only)
* ``replayssm_helion_two_launch`` ours with ``launches=2``: ring weights, then state (flush included)
* ``replayssm_helion_split`` ours with ``launches=3``: the flush rows' checkpoint write as a third launch
* ``standard_helion``      our standard decode (read state, update, write back)
* ``fla_fused_recurrent``  FLA's ``fused_recurrent_kda`` as a single-token decode from a state pool
                           (``state_v_first=True`` reads our ``[slots, HV, V, K]`` pool as is)
* ``sglang_helion_replayssm``  sglang's Helion ReplaySSM kernel (our signature), raw rings
* ``sglang_triton_replayssm``  sglang's Triton ReplaySSM decode (``is_kda=True``, softplus gate only),
                           raw rings; both peers loaded by file path (``tools.peers``), skipped if absent

Gated DeltaNet rows (``--gates gdn``, or a plan group's ``"gates"``; the CSV's ``gate`` column) time the
same names on GDN's gate: our GDN kernels, FLA's ``fused_recurrent_gated_delta_rule`` (it has no state
pool: it reads the slot set's contiguous ``[B, HV, V, K]`` view and writes its final state to its own
float32 buffer, as many bytes as an in-place write with an fp32 state), and the Triton peer with
``is_kda=False``; sglang's Helion peer is KDA only.

Our ReplaySSM designs run once per ring format of ``--ring-formats`` (``replayssm_ref.formats``; a
format the gate or L does not allow is skipped); every implementation takes the bounded gate of
``--lower-bound`` except the Triton peer.

Steady state, like a server: rows start at staggered cursors ``c0 = row % L`` and every launch in a
timed cycle gets the cursors of its step (``(c0 + t) % L``, the schedule ``advance_write_pos`` gives),
so natural flushes are spread over the steps and each row's cost is averaged over a full cycle. One
CUDA graph holds ``sets x L`` steps, rotating through ``sets`` disjoint slot sets so the working set is
several times the L2; the time per step is the median graph replay over the number of steps in it.
The copy ceiling is a 1 GiB device-to-device copy timed with events in the same run.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from replayssm_ref.formats import RING_FORMATS, ring_format
from replayssm_ref.harness import DTYPES, Problem, random_token, random_weights
from replayssm_ref.traffic import TrafficShape, replay_bytes_per_row, standard_bytes_per_row

from . import peers

REPLAYSSM_LAUNCHES = {
    "replayssm_helion": None,
    "replayssm_helion_fused": 1,
    "replayssm_helion_two_launch": 2,
    "replayssm_helion_split": 3,
}
PEERS = {"sglang_helion_replayssm": peers.sglang_helion, "sglang_triton_replayssm": peers.sglang_triton}
IMPLS = (*REPLAYSSM_LAUNCHES, "standard_helion", "fla_fused_recurrent", *PEERS)


def is_replayssm(impl: str) -> bool:
    """Rings and cursors (ours and the peers'), timed per L; the others once per shape."""
    return impl in REPLAYSSM_LAUNCHES or impl in PEERS


CSV_COLUMNS = [
    "impl", "batch", "num_q_heads", "num_v_heads", "key_dim", "value_dim", "cache_length", "state_dtype",
    "cache_dtype", "ring_format", "gate", "us_per_step", "us_p20", "us_p80", "model_bytes_per_step", "gbps_effective",
    "copy_gbps", "frac_of_copy", "steps_per_graph", "slot_sets", "device",
]  # fmt: skip


@dataclass(frozen=True)
class Case:
    batch: int
    num_q_heads: int
    num_v_heads: int
    key_dim: int
    value_dim: int
    cache_length: int
    state_dtype: str
    cache_dtype: str
    gate: str = "kda"

    def traffic(self, fmt: str = "raw") -> TrafficShape:
        es = DTYPES[self.state_dtype].itemsize
        ec = DTYPES[self.cache_dtype].itemsize
        return TrafficShape(
            self.num_q_heads, self.num_v_heads, self.key_dim, self.value_dim, es, ec, ec, 2, 2, fmt, self.gate
        )


def cursor_schedule(batch: int, cache_length: int, device, shuffle_seed: int | None = None) -> list[torch.Tensor]:
    """``write_pos`` for each of the L steps of one cycle, rows staggered by ``row % L``.

    Equal to starting from ``c0`` and applying ``advance_write_pos`` after every step (no forced
    flushes), which ``tests/test_cli_and_packaging.py`` checks. With ``shuffle_seed`` the same cursors
    go to rows in a random order: the same flushes a step, no longer one row in every L. A kernel whose
    programs take fixed, strided sets of rows (Helion's ``persistent_interleaved`` grid) can meet all
    of a step's flush rows in a few of its programs under the regular order (run 37)."""
    rows = torch.arange(batch, dtype=torch.int32)
    if shuffle_seed is not None:
        rows = rows[torch.randperm(batch, generator=torch.Generator().manual_seed(shuffle_seed))]
    c0 = (rows % cache_length).to(device)
    return [((c0 + t) % cache_length).to(torch.int32) for t in range(cache_length)]


def cycle_model_bytes(case: Case, impl: str, fmt: str = "raw") -> float:
    """Model bytes per step, averaged over the steps of one timed cycle (exact for the schedule)."""
    t = case.traffic(fmt)
    if not is_replayssm(impl):
        return case.batch * standard_bytes_per_row(t)
    L = case.cache_length
    total = 0.0
    for wp in cursor_schedule(case.batch, L, "cpu"):
        total += sum(replay_bytes_per_row(t, int(c), int(c) == L - 1) for c in wp)
    return total / L


def measure_copy_gbps(device, nbytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth (bytes read + written), events via ``triton.testing.do_bench``."""
    import triton.testing

    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median")
    return 2 * nbytes / (ms * 1e-3) / 1e9


def slot_sets(case: Case, l2_bytes: int, max_sets: int) -> int:
    t = case.traffic()
    per_row = t.num_v_heads * (t.state_head_bytes + case.cache_length * t.entry_bytes)
    return max(1, min(max_sets, math.ceil(4 * l2_bytes / (case.batch * per_row))))


class Workload:
    """State pool, rings and per-step inputs for one case; builds the step closures each impl times."""

    def __init__(self, case: Case, sets: int, device, seed: int = 0, cursor_seed: int | None = None):
        self.case, self.sets, self.device = case, sets, device
        L = case.cache_length
        p = Problem(case.batch, case.num_q_heads, case.num_v_heads, case.key_dim, case.value_dim, L, 0)
        gen = torch.Generator().manual_seed(seed)
        slots = case.batch * sets
        sd, cd = DTYPES[case.state_dtype], DTYPES[case.cache_dtype]
        HV, K, V = case.num_v_heads, case.key_dim, case.value_dim
        self.state = (torch.randn(slots, HV, V, K, device=device) * 0.1).to(sd)
        self.d_cache = (torch.randn(slots, HV, L, V, device=device) * 0.1).to(cd)
        self._rings = {}  # ring format -> (k_cache, g_cache), made on first use
        self.weights = random_weights(p, gen, device, torch.float32, gate=case.gate)
        self.tokens = [random_token(p, gen, device, torch.bfloat16, gate=case.gate) for _ in range(L)]  # per step
        self.indices = [
            torch.arange(s * case.batch, (s + 1) * case.batch, device=device, dtype=torch.int32) for s in range(sets)
        ]
        self.cursors = cursor_schedule(case.batch, L, device, cursor_seed)
        self.out = torch.empty(case.batch, 1, HV, V, device=device, dtype=torch.bfloat16)

    def rings(self, fmt: str):
        """(k_cache, g_cache) in ring format ``fmt``: unit keys and small decays (prefix sums where the
        format keeps them), so that every value stays finite."""
        if fmt not in self._rings:
            c, f = self.case, ring_format(fmt)
            slots, L = self.state.shape[0], c.cache_length
            heads = f.key_heads(c.num_q_heads, c.num_v_heads)
            k = torch.randn(slots, heads, L, c.key_dim, device=self.device)
            k = torch.nn.functional.normalize(k, dim=-1).to(DTYPES[c.cache_dtype])
            g = -torch.rand(slots, c.num_v_heads, L, c.key_dim if c.gate == "kda" else 1, device=self.device) * 0.1
            g = g if c.gate == "kda" else g[..., 0]  # GDN: [slots, HV, L]
            g = (g.cumsum(2) if f.prefix_gate else g).to(torch.float32)
            self._rings = {fmt: (k, g)}  # one format's rings at a time
        return self._rings[fmt]

    def _decode_call(self, impl: str, t: int, idx, config, fmt: str, lower_bound):
        """(decode function, its planner, args, kwargs) of one of our kernels' steps: token ``t`` of the
        cycle on the rows ``idx``. The planner builds the same launches without running them."""
        from .. import decode, plan

        w, (mixed, a, b) = self.weights, self.tokens[t]
        kwargs = {"check_values": False, "config": config}
        gdn = self.case.gate == "gdn"
        tail = (True,) if gdn else (True, lower_bound)  # GDN's calls take no lower_bound
        if is_replayssm(impl):
            args = (
                mixed, a, b, w.A_log, w.dt_bias, w.scale, self.state, self.d_cache, *self.rings(fmt),
                self.out, idx, self.cursors[t], None, *tail,
            )  # fmt: skip
            kwargs |= {"launches": REPLAYSSM_LAUNCHES[impl]}
            if gdn:
                return decode.helion_fused_recurrent_gdn_replayssm_decode, _gdn(plan.plan_replayssm), args, kwargs
            kwargs["ring_format"] = fmt
            return decode.helion_fused_recurrent_kda_replayssm_decode, plan.plan_replayssm, args, kwargs
        if impl == "standard_helion":
            args = (mixed, a, b, w.A_log, w.dt_bias, w.scale, self.state, self.out, idx, *tail)
            if gdn:
                return decode.helion_fused_recurrent_gdn_packed_decode, _gdn(plan.plan_standard), args, kwargs
            return decode.helion_fused_recurrent_kda_packed_decode, plan.plan_standard, args, kwargs
        raise ValueError(f"unknown impl {impl!r}")

    def steps(self, impl: str, config=None, *, fmt: str = "raw", lower_bound=None, peer=None):
        """The list of zero-argument launches that make one timed graph (sets x L steps)."""
        launches = []
        for idx, t in itertools.product(self.indices, range(self.case.cache_length)):
            if impl == "fla_fused_recurrent":
                launches.append(self._fla_step(*self.tokens[t], idx, lower_bound))
            elif impl in PEERS:
                launches.append(self._peer_step(impl, peer, t, idx, lower_bound))
            else:
                decode, _, args, kwargs = self._decode_call(impl, t, idx, config, fmt, lower_bound)
                launches.append(functools.partial(decode, *args, **kwargs))
        return launches

    def plan(self, impl: str, config=None, *, fmt: str = "raw", lower_bound=None):
        """The launches (``plan.Launch``) of the first step ``steps`` times, built but not run, so that
        what the device compiled for them can be read back (``tools.codegen.device_resources``)."""
        _, launches, args, kwargs = self._decode_call(impl, 0, self.indices[0], config, fmt, lower_bound)
        return launches(*args, **kwargs)

    def _peer_step(self, impl, fn, t, idx, lower_bound):
        """A peer's step on the raw rings: sglang's Helion kernel takes our arguments as they are; the
        Triton one wants ``a [B, HV, K]``, ``dt_bias [HV, K]`` and ``is_kda`` (softplus gate only)."""
        c, w, (mixed, a, b) = self.case, self.weights, self.tokens[t]
        k_cache, g_cache = self.rings("raw")
        if impl == "sglang_helion_replayssm":
            args = (mixed, a, b, w.A_log, w.dt_bias, w.scale, self.state, self.d_cache, k_cache, g_cache, self.out,
                    idx, self.cursors[t], None, True, lower_bound)  # fmt: skip
            return functools.partial(fn, *args)
        kda = c.gate == "kda"
        if kda:  # GDN's a [B, HV] and dt_bias [HV] go as they are
            a, dt = a.view(c.batch, c.num_v_heads, c.key_dim), w.dt_bias.view(c.num_v_heads, c.key_dim)
        else:
            dt = w.dt_bias
        args = (mixed, a, b, w.A_log, dt, w.scale, self.state, self.d_cache, k_cache, g_cache, self.out, idx,
                self.cursors[t], None, True)  # fmt: skip
        return functools.partial(fn, *args, is_kda=kda)

    def _fla_step(self, mixed, a, b, idx, lower_bound):
        """FLA's recurrent KDA kernel as a single-token decode: T=1 per sequence via cu_seqlens (GDN:
        :meth:`_fla_gdn_step`)."""
        if self.case.gate == "gdn":
            return self._fla_gdn_step(mixed, a, b, idx)
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

        c = self.case
        B, H, HV, K, V = c.batch, c.num_q_heads, c.num_v_heads, c.key_dim, c.value_dim
        q = mixed[:, : H * K].reshape(1, B, H, K)
        k = mixed[:, H * K : 2 * H * K].reshape(1, B, H, K)
        v = mixed[:, 2 * H * K :].reshape(1, B, HV, V)
        g = a.reshape(1, B, HV, K)
        beta = b.reshape(1, B, HV)
        cu = torch.arange(B + 1, device=self.device, dtype=torch.long)
        out = self.out.view(1, B, HV, V)
        w = self.weights

        def step():
            fused_recurrent_kda_fwd(
                q=q, k=k, v=v, g=g, beta=beta, A_log=w.A_log, dt_bias=w.dt_bias, initial_state=self.state,
                scale=w.scale, inplace_final_state=True, state_v_first=True, cu_seqlens=cu,
                ssm_state_indices=idx, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                use_beta_sigmoid_in_kernel=True, lower_bound=lower_bound, out=out,
            )  # fmt: skip

        return step

    def _fla_gdn_step(self, mixed, a, b, idx):
        """FLA's ``fused_recurrent_gated_delta_rule`` forward as a single-token decode. It has no state
        pool: it reads the rows' states as one contiguous ``[B, HV, V, K]`` view (the bench's slot sets
        are contiguous ranges, ``idx`` their first slot onwards) and writes the final states to a new
        float32 buffer."""
        from fla.ops.gated_delta_rule.fused_recurrent import fused_recurrent_gated_delta_rule_fwd

        c = self.case
        B, H, HV, K, V = c.batch, c.num_q_heads, c.num_v_heads, c.key_dim, c.value_dim
        q = mixed[:, : H * K].reshape(1, B, H, K)
        k = mixed[:, H * K : 2 * H * K].reshape(1, B, H, K)
        v = mixed[:, 2 * H * K :].reshape(1, B, HV, V)
        cu = torch.arange(B + 1, device=self.device, dtype=torch.long)
        first = int(idx[0])  # the set's slots are first .. first + B - 1 (Workload.indices)
        state = self.state[first : first + B]
        w = self.weights

        def step():
            fused_recurrent_gated_delta_rule_fwd(
                q=q, k=k, v=v, g=a.reshape(1, B, HV), beta=b.reshape(1, B, HV), A_log=w.A_log, dt_bias=w.dt_bias,
                scale=w.scale, initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True,
                use_beta_sigmoid_in_kernel=True, state_v_first=True, cu_seqlens=cu,
            )  # fmt: skip

        return step


def _gdn(planner):
    """A planner called with a GDN entry point's arguments: KDA's positional ones and ``gate="gdn"``."""

    def plan_gdn(*args, **kwargs):
        return planner(*args, None, gate="gdn", **kwargs)  # lower_bound None: GDN's softplus gate

    return plan_gdn


def time_graph(launches, warmup_ms: int = 25, rep_ms: int = 200) -> tuple[float, float, float]:
    """(median, p20, p80) microseconds per launch of a CUDA graph holding ``launches``."""
    import triton.testing

    for f in launches:  # compile and warm up outside the graph
        f()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for f in launches:
            f()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for f in launches:
            f()
    q = triton.testing.do_bench(graph.replay, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.2, 0.8])
    n = len(launches)
    return tuple(x * 1e3 / n for x in q)


def runs_of(case: Case, args, peer_fns: dict) -> list[tuple[str, str]]:
    """(impl, ring format) pairs timed for ``case``: our ReplaySSM designs once per format the gate and
    L allow (at L = 1 only raw: the standard kernel runs, no ring), peers in the raw format if loaded,
    the others with no format."""
    runs = []
    for impl in args.impls:
        if case.gate == "gdn" and impl == "sglang_helion_replayssm":
            continue  # a KDA kernel
        if impl in REPLAYSSM_LAUNCHES:
            # GDN and L = 1 (the standard kernel, no ring) run the raw format only
            for fmt in args.ring_formats if case.cache_length > 1 and case.gate == "kda" else ["raw"]:
                try:
                    ring_format(fmt).check_gate(args.lower_bound if case.gate == "kda" else None, case.cache_length)
                except ValueError:
                    continue
                if REPLAYSSM_LAUNCHES[impl] == 1 and (case.cache_length == 1 or (case.gate, fmt) == ("kda", "raw")):
                    continue  # the one launch: scalar or shared entry weights only, and a ring
                runs.append((impl, fmt))
        elif impl in PEERS:
            if peer_fns.get(impl) is not None:
                runs.append((impl, "raw"))
        else:
            runs.append((impl, ""))
    return runs


def build_cases(args) -> list[Case]:
    """The cross product of the grid options, or the union of a plan's groups (``--plan``), in order."""
    groups = [vars(args)] if args.plan is None else json.loads(args.plan.read_text())["groups"]
    cases = []
    for g in groups:
        pairs = [tuple(p) if not isinstance(p, str) else dtype_pair(p) for p in g["dtype_pairs"]]
        for gate, B, HV, gqa, L, (sd, cd), kv in itertools.product(
            g.get("gates", ["kda"]), g["batch"], g["heads"], g["gqa"], g["cache_lengths"], pairs, g.get("dims", [128])
        ):
            case = Case(B, HV // gqa, HV, kv, kv, L, sd, cd, gate)
            if HV % gqa == 0 and case not in cases:
                cases.append(case)
    return cases


def dtype_pair(text: str) -> tuple[str, str]:
    s, _, c = text.partition("/")
    if s not in DTYPES or c not in DTYPES:
        raise argparse.ArgumentTypeError(f"expected STATE/CACHE dtypes like float32/bfloat16, got {text!r}")
    return s, c


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m replayssm_kernels.tools.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 64, 256], help="rows per step")
    ap.add_argument("--heads", type=int, nargs="+", default=[8, 16, 32, 64], help="HV values")
    ap.add_argument("--gqa", type=int, nargs="+", default=[1, 2], help="HV/H ratios")
    ap.add_argument("--dims", type=int, nargs="+", default=[128], help="K = V values")
    ap.add_argument(
        "--gates", nargs="+", choices=["kda", "gdn"], default=["kda"],
        help="Kimi Delta Attention and/or Gated DeltaNet (GDN runs the softplus gate and the raw ring format)",
    )  # fmt: skip
    ap.add_argument("--cache-lengths", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64], help="ring lengths L")
    ap.add_argument(
        "--dtype-pairs", type=dtype_pair, nargs="+",
        default=[("float32", "bfloat16"), ("float32", "float32"), ("bfloat16", "bfloat16")],
        help="state/ring dtype pairs",
    )  # fmt: skip
    ap.add_argument(
        "--plan", type=Path,
        help="JSON file of case groups (each with the grid options' keys) timed in order in one process, "
        "instead of the grid options' cross product: compiled kernels are shared across its cases",
    )  # fmt: skip
    ap.add_argument(
        "--impls", nargs="+", choices=IMPLS,
        default=["replayssm_helion", "replayssm_helion_fused", "standard_helion", "fla_fused_recurrent", *PEERS],
        help="the default design, the one launch (where a table may pick it: plots.as_default_design), both "
        "baselines and the peers unless told; the other ReplaySSM designs are opt-in",
    )  # fmt: skip
    ap.add_argument(
        "--ring-formats", nargs="+", choices=sorted(RING_FORMATS), default=["raw"],
        help="ring formats our ReplaySSM designs run in (one row each); skipped where the gate or L forbids one",
    )  # fmt: skip
    ap.add_argument(
        "--lower-bound", type=lambda x: None if x.lower() == "none" else float(x), default=-5.0,
        help="the gate of every implementation but the Triton peer: a bounded gate's lower bound, or 'none' "
        "for the softplus gate (the predecayed format then never runs)",
    )  # fmt: skip
    ap.add_argument("--peers", type=Path, default=peers.DEFAULT_DIR, help="folder of the sglang peer kernel files")
    ap.add_argument("--max-sets", type=int, default=64, help="cap on rotated slot sets per graph")
    ap.add_argument("--rep-ms", type=int, default=200, help="timing window per case and implementation")
    ap.add_argument(
        "--cursor-seed",
        type=int,
        help="deal the cycle's cursors to rows in a random order (cursor_schedule; env.json records it) "
        "instead of row %% L",
    )
    ap.add_argument("--out", type=Path, required=True, help="folder for the CSV and env.json (results/<device>/)")
    ap.add_argument("--csv-name", default="decode_throughput.csv", help="the CSV's file name in --out")
    ap.add_argument("--append", action="store_true", help="add rows to an existing CSV instead of replacing it")
    return ap.parse_args(argv)


def _save(rows, csv: Path, previous):
    import pandas as pd

    df = pd.DataFrame(rows, columns=CSV_COLUMNS)
    if previous is not None:
        df = pd.concat([previous, df], ignore_index=True)
    df.to_csv(csv, index=False)
    return df


def main(argv=None) -> int:
    import pandas as pd

    from ..configs import one_launch_rule, split_flush_from
    from ..plan import default_launches
    from .envinfo import write_env_json

    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("the benchmark needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    copy_gbps = measure_copy_gbps(device)
    print(f"copy ceiling: {copy_gbps:.0f} GB/s on {props.name}", flush=True)

    cases = build_cases(args)
    peer_fns = {name: load(args.peers) for name, load in PEERS.items() if name in args.impls}
    for name, fn in peer_fns.items():
        if fn is None:
            print(f"{name}: its files are not in {args.peers}; skipped", flush=True)
    command = "python -m replayssm_kernels.tools.bench " + " ".join(argv if argv is not None else sys.argv[1:])
    env_path = args.out / "env.json"
    runs = []  # an --append run keeps the earlier runs' configs beside its own
    if args.append and env_path.exists():
        old = json.loads(env_path.read_text()).get("config", {})
        runs = old.get("runs", [{k: v for k, v in old.items() if k != "runs"}] if old else [])
    this = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    this["split_flush_from_l"] = split_flush_from(device)  # the default design's choice (plots' headline)
    lengths = sorted({c.cache_length for c in cases})
    this["default_launches"] = {str(L): default_launches(L, device) for L in lengths}  # launches=None, by L (KDA raw)
    this["one_launch_rule"] = one_launch_rule(device)  # (up to L, GDN up to batch): configs.one_launch_rule
    if args.plan is not None:
        this["plan_groups"] = json.loads(args.plan.read_text())["groups"]

    def write_env(done: bool) -> None:  # before the sweep too, so a run cut short still has one
        run = this | {"copy_gbps": copy_gbps, "command": command, "completed": done}
        write_env_json(env_path, config={"runs": runs + [run]})

    args.out.mkdir(parents=True, exist_ok=True)
    write_env(done=False)
    rows, seen_baselines = [], set()
    args.out.mkdir(parents=True, exist_ok=True)
    csv = args.out / args.csv_name
    previous = pd.read_csv(csv) if args.append and csv.exists() else None
    from rich.progress import Progress

    with Progress(disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task("sweep", total=len(cases))
        for case in cases:
            sets = slot_sets(case, l2, args.max_sets)
            work = Workload(case, sets, device, cursor_seed=args.cursor_seed)
            for impl, fmt in runs_of(case, args, peer_fns):
                # Baselines do not depend on L or the ring dtype: time them once per shape, at L=1 sets.
                key = (impl, case.gate, case.batch, case.num_q_heads, case.num_v_heads, case.key_dim, case.state_dtype)
                if not is_replayssm(impl):
                    if key in seen_baselines:
                        continue
                    seen_baselines.add(key)
                try:
                    lower_bound = args.lower_bound if case.gate == "kda" else None
                    steps = work.steps(impl, fmt=fmt, lower_bound=lower_bound, peer=peer_fns.get(impl))
                    med, p20, p80 = time_graph(steps, rep_ms=args.rep_ms)
                except Exception as exc:  # a failing impl is recorded, not hidden
                    print(f"{impl} {fmt} {case}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                    continue
                nbytes = cycle_model_bytes(case, impl, fmt or "raw")
                gbps = nbytes / (med * 1e-6) / 1e9
                rows.append(
                    {
                        "impl": impl, "batch": case.batch, "num_q_heads": case.num_q_heads,
                        "num_v_heads": case.num_v_heads, "key_dim": case.key_dim, "value_dim": case.value_dim,
                        "cache_length": case.cache_length if is_replayssm(impl) else 0,
                        "state_dtype": case.state_dtype,
                        "cache_dtype": case.cache_dtype if is_replayssm(impl) else "", "ring_format": fmt,
                        "gate": case.gate,
                        "us_per_step": med, "us_p20": p20, "us_p80": p80, "model_bytes_per_step": nbytes,
                        "gbps_effective": gbps, "copy_gbps": copy_gbps, "frac_of_copy": gbps / copy_gbps,
                        "steps_per_graph": sets * case.cache_length, "slot_sets": sets, "device": props.name,
                    }
                )  # fmt: skip
                print(
                    f"{impl:24s} {case.gate} {fmt:10s} B={case.batch:<3d} H={case.num_q_heads:<2d} "
                    f"HV={case.num_v_heads:<2d} "
                    f"K=V={case.key_dim} L={case.cache_length:<2d} {case.state_dtype}/{case.cache_dtype}: "
                    f"{med:8.2f} us/step  {gbps:6.0f} GB/s ({gbps / copy_gbps:.0%} of copy)",
                    flush=True,
                )
            del work
            torch.cuda.empty_cache()
            bar.advance(task)
            df = _save(rows, csv, previous)  # after every case, so a cut-short sweep keeps its rows

    df = _save(rows, csv, previous)
    write_env(done=True)
    print(f"wrote {csv} ({len(df)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
