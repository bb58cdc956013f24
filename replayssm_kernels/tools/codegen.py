"""``python -m replayssm_kernels.tools.codegen``: what Helion generates, compiled for sm_90 on any machine.

No GPU needed: Helion writes the Triton source on the CPU and Triton compiles it for an H100/H200
target offline. The counts below are a cheap proxy for the costs that keep a memory-bound kernel from
the copy ceiling: ``bar.sync`` and ``st.shared`` (layout conversions through shared memory),
``convert_layout`` ops in the TTGIR, how many global loads are 16-byte vectors, and, from ``ptxas -v``
on the PTX, the registers a thread uses and the bytes it spills (registers set how many programs an
SM holds, and so how much memory latency a latency-bound kernel can hide). Numbers are for the local
Triton (3.9 in CI), not the GPU machine's 3.6: compare variants, not absolutes.

    python -m replayssm_kernels.tools.codegen --kernel state --cache-length 16 --block-v 64 --num-warps 2
    python -m replayssm_kernels.tools.codegen --kernel ring_weights --memory-order \
        --config '{"prep_stages": 4, "ring_chunk": 2}'
    python -m replayssm_kernels.tools.codegen --kernel state_split --config '{"k_stages": 3}'
    python -m replayssm_kernels.tools.codegen --kernel standard --block-v 64 --dump /tmp/k.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

TORCH_TO_TRITON = {torch.float32: "*fp32", torch.bfloat16: "*bf16", torch.float16: "*fp16", torch.int32: "*i32"}


# --kernel -> (which decode function, launches=, index of the launch in its plan); "flush" is the per-row
# flush launch, or the one over the flushing rows when --config sets flush_programs
KERNELS = {
    "ring_weights": ("replayssm", 2, 0),
    "ring_weights_split": ("replayssm", 3, 0),
    "state": ("replayssm", 2, 1),
    "state_split": ("replayssm", 3, 1),
    "flush": ("replayssm", 3, 2),
    "fused": ("replayssm", 1, 0),
    "standard": ("standard", None, 0),
}


def _problem_inputs(
    num_v_heads: int, key_dim: int, value_dim: int, cache_length: int, state_dtype, gate="kda", ring_format="raw"
):  # fmt: skip
    """Random CPU inputs of a 4-row decode step (codegen depends on shapes and dtypes only)."""
    from replayssm_ref import ReplaySSMCache
    from replayssm_ref.harness import Problem, random_token, random_weights

    HV, K, V = num_v_heads, key_dim, value_dim
    p = Problem(4, HV, HV, K, V, cache_length)
    gen = torch.Generator().manual_seed(0)
    w = random_weights(p, gen, "cpu", gate=gate)
    mixed, a, b = random_token(p, gen, "cpu", torch.bfloat16, gate=gate)
    S = torch.zeros(p.num_slots, HV, V, K, dtype=state_dtype)
    c = ReplaySSMCache.allocate(
        num_slots=p.num_slots, batch=4, num_q_heads=HV, num_v_heads=HV, key_dim=K, value_dim=V,
        cache_length=cache_length, ring_format=ring_format, gate=gate,
    )  # fmt: skip
    out = torch.empty(4, 1, HV, V, dtype=torch.bfloat16)
    idx = torch.arange(4, dtype=torch.int32)
    return (mixed, a, b, w.A_log, w.dt_bias, w.scale, S), (c.d_cache, c.k_cache, c.g_cache), out, idx, c.write_pos


def _plan(which: str, launches, common, caches, out, idx, write_pos, config, gate="kda", ring_format="raw"):
    from ..plan import plan_replayssm, plan_standard

    if which == "standard":
        return plan_standard(*common, out, idx, True, config=config)
    bound = -2.0 if ring_format == "predecayed" else None  # the predecayed format needs the bounded gate
    return plan_replayssm(
        *common, *caches, out, idx, write_pos, None, True, bound, launches=launches, config=config, gate=gate,
        ring_format=ring_format,
    )  # fmt: skip


def _bound(launch):
    """Helion's bound kernel of one ``plan.Launch``: the object the decode functions run."""
    return launch.kernel().bind(tuple(launch.kwargs().values()))


def launch_source(launch) -> tuple[str, dict]:
    """(Triton source, {argument name: tensor}) of one ``plan.Launch``."""
    tensors = {n: t for n, t in launch.kwargs().items() if isinstance(t, torch.Tensor)}
    return _bound(launch).to_triton_code(launch.config), tensors


def generated_source(
    kernel: str,
    cache_length: int,
    block_v: int,
    num_warps: int,
    state_dtype,
    extra: dict | None = None,
    block_k: int = 32,
    gate: str = "kda",
    ring_format: str = "raw",
):
    """(Triton source, {argument name: tensor}) for one kernel at K=V=128, HV=32.

    The launch is the one the decode functions build (``plan.plan_replayssm``), from a table-style
    config: ``block_sizes`` [block_v, block_k] (``[block_v]`` for the standard kernel), ``num_warps``
    and ``extra``'s kernel options; ``gate`` and ``ring_format`` as the decode calls take them (the
    one launch, ``fused``, needs GDN or the predecayed format)."""
    common, caches, out, idx, write_pos = _problem_inputs(32, 128, 128, cache_length, state_dtype, gate, ring_format)
    which, launches, index = KERNELS[kernel]
    blocks = [block_v] if which == "standard" else [block_v, block_k]
    config = {"block_sizes": blocks, "num_warps": num_warps, "num_stages": 1} | (extra or {})
    launch = _plan(which, launches, common, caches, out, idx, write_pos, config, gate, ring_format)[index]
    source, tensors = launch_source(launch)
    return source, tensors, launch.config


def _host_constant(name: str, source: str, tensors: dict) -> int:
    """A block size the host code sets: a literal, or the next power of two of a tensor's size."""
    literal = re.search(rf"{name} = (\d+)", source)
    if literal:
        return int(literal.group(1))
    size = re.search(rf"{name} = max\(triton\.next_power_of_2\((\w+)\.size\((\d)\)\), 1\)", source)
    return 1 << (tensors[size.group(1)].size(int(size.group(2))) - 1).bit_length()


def compile_sm90(source: str, tensors: dict, num_warps: int, maxnreg: int | None = None):
    """The generated kernel compiled for sm_90 offline (Triton's ``CompiledKernel``: ``.asm``, ``.metadata``),
    with the register cap ``maxnreg`` where the config sets one. (On a GPU Helion 1.5.0 passes it to the
    launch only with a persistent ``pid_type``, and refuses it otherwise; offline it applies either way.)"""
    import triton
    from triton.backends.compiler import GPUTarget

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("generated_kernel", f.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    os.unlink(f.name)
    fn = next(getattr(mod, n) for n in dir(mod) if n.startswith("_helion_"))
    sig, consts, attrs = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        stride = re.match(r"(.*)_stride_(\d)$", name)
        if name.startswith("_RDIM") or name.startswith("_BLOCK"):  # the host code sets these
            sig[name], consts[name] = "constexpr", _host_constant(name, source, tensors)
        elif stride:
            t = tensors[stride.group(1)]
            value = t.stride(int(stride.group(2)))
            if value == 1:  # Triton specialises unit strides at run time; do the same here
                sig[name], consts[name] = "constexpr", 1
            else:
                sig[name] = "i32"
                attrs[(i,)] = [["tt.divisibility", 16]] if value % 16 == 0 else []
        elif name in tensors:
            sig[name] = TORCH_TO_TRITON[tensors[name].dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in ("scale", "lower_bound"):
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    options = {"num_warps": num_warps, "num_stages": 1} | ({"maxnreg": maxnreg} if maxnreg else {})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def compile_report(compiled) -> dict:
    """Count the costly instructions of a kernel compiled offline (``compile_sm90``)."""
    ptx, ttgir = compiled.asm["ptx"], compiled.asm["ttgir"]
    return {
        **ptxas_usage(ptx),
        "bar_sync": ptx.count("bar.sync"),
        "st_shared": ptx.count("st.shared"),
        "convert_layout": ttgir.count("ttg.convert_layout"),
        "ld_global": ptx.count("ld.global"),
        "ld_global_v4": ptx.count("ld.global.v4"),
        "cp_async": ptx.count("cp.async.cg") + ptx.count("cp.async.ca"),  # pipelined loads (num_stages)
        "shared_bytes": compiled.metadata.shared,
    }


# Hopper and Ampere: at most 32 resident programs (thread blocks) an SM, registers allocated to a warp in
# units of 256 (8 a thread), and 1 KB of shared memory reserved per program (CUDA occupancy rules)
MAX_PROGRAMS_PER_SM, WARP_REGISTER_UNIT, SHARED_RESERVED = 32, 256, 1024


def programs_per_sm(registers: int, num_warps: int, shared_bytes: int, props) -> int:
    """The programs of one launch an SM can hold at once, by registers, warps and shared memory: the
    occupancy limit, before any load imbalance. ``props`` is ``torch.cuda.get_device_properties``."""
    warp_registers = -(-registers * 32 // WARP_REGISTER_UNIT) * WARP_REGISTER_UNIT
    limits = [
        MAX_PROGRAMS_PER_SM,
        props.regs_per_multiprocessor // (warp_registers * num_warps),
        props.max_threads_per_multi_processor // (32 * num_warps),
    ]
    if shared_bytes:
        limits.append(props.shared_memory_per_multiprocessor // (shared_bytes + SHARED_RESERVED))
    return min(limits)


def device_resources(launch) -> dict:
    """What the GPU's own Triton compiled for one ``plan.Launch``, read after the launch has run
    there: registers a thread, local memory a thread (spills; Triton's ``n_spills`` counts 4-byte words),
    shared memory a program, warps, and ``programs_per_sm``. The offline numbers above come from the local
    Triton; the GPU machine's may differ (``flush_keep`` at fp32 L=16: 128 registers offline, 140 there,
    runs 35 and 37). {} off CUDA or when nothing was compiled for it (an interpreter)."""
    import triton

    device = launch.device
    if device.type != "cuda":
        return {}
    run = _bound(launch).compile_config(launch.config)  # cached: the host function that ran
    compiled = [
        kernel
        for jit in run.__globals__.values()
        if isinstance(jit, triton.runtime.jit.JITFunction)
        for cache in jit.device_caches.values()
        for kernel in cache[0].values()  # (kernel cache, ...) per device: every specialisation compiled
    ]
    if not compiled:
        return {}
    rows = []
    for kernel in compiled:
        kernel._init_handles()  # loads it if not yet (sets n_regs, n_spills)
        rows.append((kernel.n_regs, kernel.n_spills * 4, kernel.metadata.shared, kernel.metadata.num_warps))
    registers, local_bytes, shared, warps = max(rows)  # the specialisations agree so far; report the largest
    props = torch.cuda.get_device_properties(device)
    return {
        "registers": registers,
        "local_bytes": local_bytes,
        "shared_bytes": shared,
        "num_warps": warps,
        "programs_per_sm": programs_per_sm(registers, warps, shared, props),
    }


def _triton_bin() -> Path:
    """The folder of the CUDA tools (ptxas, nvdisasm) that Triton's wheel ships."""
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin"


MEMORY_OPS = {"LDGSTS": "A", "LDG": "L", "STG": "S"}  # SASS mnemonic -> letter of sass_memory_order


def sass_memory_order(cubin: bytes) -> str:
    """The kernel's global-memory instructions in SASS program order, one letter each: ``L`` a load,
    ``S`` a store, ``A`` an async copy into shared memory (a pipelined load), from Triton's
    ``nvdisasm``; "" if there is none here.

    Neither Triton nor ptxas moves a load above a store it cannot prove apart, so the order shows
    where a program must wait: ``LLSSLLSS...`` is one memory round trip per ``LL``."""
    nvdisasm = _triton_bin() / "nvdisasm"
    if not nvdisasm.exists():
        return ""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        sass = subprocess.run([str(nvdisasm), "-c", str(path)], capture_output=True, text=True).stdout
    return "".join(MEMORY_OPS[op] for op in re.findall(r"\b(LDGSTS|LDG|STG)\b", sass))


def ptxas_usage(ptx: str) -> dict:
    """{"registers", "spill_bytes"} from ``ptxas -v`` (sm_90a), or {} if no ptxas here reads this PTX.

    Triton ships two assemblers; the older one rejects the PTX version newer Tritons emit, so each is
    tried in turn (``TRITON_PTXAS_PATH`` first, as Triton itself does)."""
    bin_dir = _triton_bin()
    candidates = [os.environ.get("TRITON_PTXAS_PATH"), bin_dir / "ptxas-blackwell", bin_dir / "ptxas"]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        for exe in filter(None, candidates):
            if not Path(exe).exists():
                continue
            cmd = [str(exe), "-v", "-arch=sm_90a", str(src), "-o", str(Path(tmp) / "kernel.cubin")]
            log = subprocess.run(cmd, capture_output=True, text=True).stderr
            regs, spill = re.search(r"Used (\d+) registers", log), re.search(r"(\d+) bytes spill stores", log)
            if regs and spill:
                return {"registers": int(regs.group(1)), "spill_bytes": int(spill.group(1))}
    return {}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m replayssm_kernels.tools.codegen", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--kernel",
        choices=tuple(KERNELS),
        default="state",
        help="ring_weights / state: the two launches of launches=2; ring_weights_split / state_split / flush: "
        "the three of launches=3; fused: the one launch (with --gate gdn or --ring-format predecayed); "
        "standard: the standard kernel",
    )
    ap.add_argument("--cache-length", type=int, default=16, help="ring length L")
    ap.add_argument("--block-v", type=int, default=64, help="V tile")
    ap.add_argument("--block-k", type=int, default=32, help="state kernels: K channels per pipelined chunk")
    ap.add_argument("--num-warps", type=int, default=2, help="warps of the launch")
    ap.add_argument("--state-dtype", choices=("float32", "bfloat16"), default="float32", help="state dtype")
    ap.add_argument("--gate", choices=("kda", "gdn"), default="kda", help="KDA or Gated DeltaNet")
    ap.add_argument("--ring-format", choices=("raw", "predecayed"), default="raw", help="KDA's ring format")
    ap.add_argument("--config", type=json.loads, default={}, help="kernel options (a table entry's) as JSON")
    ap.add_argument("--dump", help="also write the generated Triton source here")
    ap.add_argument(
        "--memory-order",
        action="store_true",
        help="also print the global loads (L), stores (S) and async copies (A) in SASS order",
    )
    args = ap.parse_args(argv)
    if os.environ.get("HELION_INTERPRET") == "1" or os.environ.get("TRITON_INTERPRET") == "1":
        print("unset HELION_INTERPRET / TRITON_INTERPRET: this compiles real Triton code", file=sys.stderr)
        return 2
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    source, tensors, config = generated_source(
        args.kernel, args.cache_length, args.block_v, args.num_warps, getattr(torch, args.state_dtype), args.config,
        args.block_k, args.gate, args.ring_format,
    )  # fmt: skip
    if args.dump:
        with open(args.dump, "w") as f:
            f.write(source)
    compiled = compile_sm90(source, tensors, config.num_warps, config.config.get("maxnreg"))
    report = compile_report(compiled)
    print(" ".join(f"{k}={v}" for k, v in report.items()))
    if args.memory_order:
        print("memory_order=" + sass_memory_order(compiled.asm["cubin"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
