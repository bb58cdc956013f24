"""``python -m replayssm_kernels.tools.ceiling``: how fast can a kernel *read* a gathered state pool?

A non-flush ReplaySSM step is, in bytes, a read-only stream: each (row, value head) reads its
``[V, K]`` checkpoint from a slot of the pool and reduces it against two K-vectors. This measures that
core alone, with no ring and no writes, in the program shapes a Helion kernel can take:

* ``full``:  one program per (row, head, V tile) loads its ``[BV, K]`` tile at once into registers
  (the standard kernel's shape);
* ``chunk``: the same program walks K in ``KC``-wide chunks through a pipelined loop
  (``range_num_stages``: cp.async into shared memory, the next chunks' loads in flight);

beside two ceilings measured in the same run: a 1 GiB device-to-device copy (read + write bytes) and
``torch.sum`` over the same pool (read only). Rows rotate through disjoint slot sets so the working
set is several times the L2, under a CUDA graph, like ``bench``. Writes ``matvec_ceiling.csv`` and
``env.json``.

    python -m replayssm_kernels.tools.ceiling --out /tmp/ceiling
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import helion
import helion.language as hl
import torch

# (variant, block_v, block_k, num_warps, pipeline depth); block_k = K for "full"
VARIANTS = [
    ("full", 128, None, 4, 0),
    ("full", 128, None, 8, 0),
    ("full", 64, None, 2, 0),
    ("full", 64, None, 4, 0),
    ("full", 32, None, 1, 0),
    ("full", 32, None, 2, 0),
    ("chunk", 128, 32, 4, 3),
    ("chunk", 128, 32, 4, 4),
    ("chunk", 128, 64, 4, 2),
    ("chunk", 128, 32, 8, 3),
    ("chunk", 64, 32, 2, 3),
    ("chunk", 64, 64, 4, 3),
    ("chunk", 32, 32, 1, 4),
]


def _matvec_full(state: torch.Tensor, slots: torch.Tensor, x: torch.Tensor, y: torch.Tensor, out: torch.Tensor):
    """out[b, j, :] = S x + S y with S = state[slots[b], j] (fp32 math), the tile loaded at once."""
    B, HV = x.size(0), x.size(1)
    hl.specialize(x.size(2))
    V = hl.specialize(state.size(2))
    block_v = hl.register_block_size(V)
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        j = tile_j.begin
        S = state[slots[tile_b], j, tile_v, :].to(torch.float32)  # [1, BV, K]
        sx = (S * x[tile_b, j, :][:, None, :]).sum(2)
        sy = (S * y[tile_b, j, :][:, None, :]).sum(2)
        out[tile_b, j, tile_v] = sx + sy
    return out


def _matvec_chunk(state: torch.Tensor, slots: torch.Tensor, x: torch.Tensor, y: torch.Tensor, out: torch.Tensor):
    """As ``_matvec_full``, K walked in chunks by a (pipelined) device loop."""
    B, HV = x.size(0), x.size(1)
    K = hl.specialize(x.size(2))
    V = hl.specialize(state.size(2))
    block_v = hl.register_block_size(V)
    block_k = hl.register_block_size(K)
    for tile_b, tile_j, tile_v in hl.tile([B, HV, V], block_size=[1, 1, block_v]):
        j = tile_j.begin
        sx = hl.zeros([tile_b, tile_v], dtype=torch.float32)
        sy = hl.zeros([tile_b, tile_v], dtype=torch.float32)
        for tile_k in hl.tile(K, block_size=block_k):
            S = state[slots[tile_b], j, tile_v, tile_k].to(torch.float32)  # [1, BV, KC]
            sx = sx + (S * x[tile_b, j, tile_k][:, None, :]).sum(2)
            sy = sy + (S * y[tile_b, j, tile_k][:, None, :]).sum(2)
        out[tile_b, j, tile_v] = sx + sy
    return out


def variant_kernel(variant: str, block_v: int, block_k: int | None, num_warps: int, stages: int):
    if variant == "full":
        cfg = helion.Config(block_sizes=[block_v], num_warps=num_warps, num_stages=1)
        return helion.kernel(config=cfg, static_shapes=False)(_matvec_full)
    cfg = helion.Config(block_sizes=[block_v, block_k], num_warps=num_warps, num_stages=1, range_num_stages=[0, stages])
    return helion.kernel(config=cfg, static_shapes=False)(_matvec_chunk)


def main(argv=None) -> int:
    import pandas as pd

    from .bench import measure_copy_gbps, time_graph
    from .envinfo import write_env_json

    ap = argparse.ArgumentParser(prog="python -m replayssm_kernels.tools.ceiling", description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256, help="rows")
    ap.add_argument("--heads", type=int, default=32, help="HV")
    ap.add_argument("--dim", type=int, default=128, help="K = V")
    ap.add_argument("--sets", type=int, default=4, help="disjoint slot sets the graph rotates through")
    ap.add_argument("--state-dtype", choices=("float32", "bfloat16"), default="float32", help="state dtype")
    ap.add_argument("--rep-ms", type=int, default=50, help="timing window per variant")
    ap.add_argument("--out", type=Path, required=True, help="folder for the CSV and env.json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    dtype = getattr(torch, args.state_dtype)
    B, HV, D = args.batch, args.heads, args.dim
    gen = torch.Generator(device=dev).manual_seed(0)
    pool = torch.randn(B * args.sets, HV, D, D, device=dev, dtype=dtype, generator=gen)
    perm = torch.randperm(B * args.sets, device=dev, generator=gen).to(torch.int32)
    slot_sets = [perm[s * B : (s + 1) * B].contiguous() for s in range(args.sets)]
    x = torch.randn(B, HV, D, device=dev, generator=gen)
    y = torch.randn(B, HV, D, device=dev, generator=gen)
    out = torch.empty(B, HV, D, device=dev)
    expect = torch.einsum("bjvk,bjk->bjv", pool[slot_sets[0].long()].float(), x + y)
    read_bytes = B * HV * D * D * dtype.itemsize

    args.out.mkdir(parents=True, exist_ok=True)
    command = "python -m replayssm_kernels.tools.ceiling " + " ".join(argv if argv is not None else sys.argv[1:])
    write_env_json(args.out / "env.json", config=vars(args) | {"command": command, "variants": VARIANTS})
    copy_gbps = measure_copy_gbps(dev)
    rows, device = [], torch.cuda.get_device_name()

    def record(name, block_v, block_k, warps, stages, us):
        gbps = read_bytes / (us * 1e-6) / 1e9
        rows.append({"variant": name, "block_v": block_v, "block_k": block_k, "num_warps": warps,
                     "pipeline_stages": stages, "us": us, "read_bytes": read_bytes, "gbps": gbps,
                     "copy_gbps": copy_gbps, "frac_of_copy": gbps / copy_gbps, "device": device})  # fmt: skip
        print(f"{name:10s} BV={block_v} KC={block_k} w={warps} stages={stages}: {us:8.2f} us {gbps:6.0f} GB/s "
              f"({gbps / copy_gbps:.0%} of copy)", flush=True)  # fmt: skip
        pd.DataFrame(rows).to_csv(args.out / "matvec_ceiling.csv", index=False)

    whole = [lambda: pool[:B].sum()]  # a contiguous read of the same number of bytes
    record("torch_sum", None, None, None, None, time_graph(whole, rep_ms=args.rep_ms)[0])
    for v in VARIANTS:
        kern = variant_kernel(*v)
        try:
            kern(pool, slot_sets[0], x, y, out)
            torch.testing.assert_close(out, expect, rtol=1e-3, atol=1e-2)
            launches = [lambda s=s, k=kern: k(pool, s, x, y, out) for s in slot_sets]
            record(*v, time_graph(launches, rep_ms=args.rep_ms)[0])
        except Exception as exc:  # a config that does not compile or fit is reported, not fatal
            print(f"{v}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
    print(f"wrote {args.out / 'matvec_ceiling.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
