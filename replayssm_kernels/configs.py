"""Tuned kernel configs as data: ``configs/<device>.json``, keyed by kernel / state dtype / shape class.

A file looks like::

    {"device": "NVIDIA H200", "tuned_by": "<command that produced it>",
     "configs": {"replayssm/float32/K128-V128-LB16": {"block_sizes": [64, 32], "num_warps": 2, ...}, ...}}

Lookup falls back from the exact shape class to ``<kernel>/<dtype>/*`` to ``<kernel>/*/*``, and from the
device's file to ``default.json``. Nothing here autotunes; ``python -m replayssm_kernels.tune`` writes
these files on a GPU.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import helion
import torch

CONFIG_DIR = Path(__file__).parent / "configs"
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def device_key(device: torch.device | str) -> str:
    """File stem for a device: ``nvidia_h200`` for an H200, ``cpu`` on the CPU."""
    device = torch.device(device)
    if device.type != "cuda":
        return device.type
    return re.sub(r"[^a-z0-9]+", "_", torch.cuda.get_device_name(device).lower()).strip("_")


def shape_class(kind: str, shapes) -> str:
    from .kda_decode import ring_block

    label = f"K{shapes.key_dim}-V{shapes.value_dim}"
    if kind.startswith("replayssm"):
        label += f"-LB{ring_block(shapes.cache_length)}"
    return label


@functools.cache
def _read_doc(stem: str) -> dict:
    path = CONFIG_DIR / f"{stem}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _read(stem: str) -> dict:
    return _read_doc(stem).get("configs", {})


def lookup(kind: str, device_stem: str, dtype_name: str, cls: str) -> tuple[dict, str]:
    """(config dict, 'file:key' it came from)."""
    kinds = [kind, kind.split("-")[0]] if "-" in kind else [kind]  # replayssm-precise falls back to replayssm
    for stem in (device_stem, "default"):
        table = _read(stem)
        for k in kinds:
            for key in (f"{k}/{dtype_name}/{cls}", f"{k}/{dtype_name}/*", f"{k}/*/*"):
                if key in table:
                    return table[key], f"{stem}:{key}"
    raise LookupError(f"no config for {kind}/{dtype_name}/{cls} in {CONFIG_DIR} (default.json is missing?)")


# Entries that are not ``helion.Config`` fields but choices baked into the kernel as constexprs.
KERNEL_OPTIONS = {
    "ring_tile": 16,  # two-launch state kernel: most ring positions of d per device-loop iteration
    "ring_chunk": 8,  # ring-weights launch and flush: most ring positions per unrolled chunk
    "prep_warps": 1,  # two- and three-launch: warps of launch 1 (the per-(row, head) ring weights)
    "prep_heads": 1,  # two- and three-launch: value heads per program of launch 1 (1 if it does not divide HV)
    # two- and three-launch: pipeline depth of launch 1's loop over ring chunks (Triton software
    # pipelining: the next chunks' k and g in flight while one is computed), 0 or 1 for none
    "prep_stages": 0,
    # ReplaySSM flush: K channels rebuilt per step (bounds the flush's registers); with flush_overlap,
    # flush_weights, all of K and a ring of one tile, a flush-rows item loads its checkpoint tile once
    # for its output and its flush (ONE in kda_decode._flush_rows_body)
    "flush_block_k": 32,
    "flush_block_v": 0,  # three-launch: the flush launch's V tile (0: the state launch's)
    "flush_warps": 0,  # three-launch: the flush launch's warps (0: the state launch's)
    # two- and three-launch, fast precision: flush by ring tiles of up to this many positions (a reverse
    # scan and a dot per tile) instead of walking the ring CH positions at a time (0)
    "flush_tiles": 0,
    # three-launch, fast precision, with flush_tiles: the flush launch as this many programs sharing the
    # flush rows' work (a grid over the flushing rows only), instead of one program per (row, head, V
    # tile) (0; also for batches over kda_decode.FLUSH_ROWS_MAX_BATCH)
    "flush_programs": 0,
    # with flush_programs: the flush launch also computes its rows' output (the state launch skips flush
    # rows), so it runs beside the state launch on a second stream: 1, or 2 for a high-priority stream
    "flush_overlap": 0,
    # with flush_programs (three launches), or flush_tiles in a two-launch step (the state launch's
    # flush): launch 1 also stores the flush rows' ring weights W_i alpha kappa_i (it computes them for
    # its ring scalars; a [B, HV, L, K] fp32 scratch), so a flush is loads and a dot per ring tile, with
    # no gate, reverse scan or exp (1), instead of rebuilding them per item (0)
    "flush_weights": 0,
    # with flush_programs: pipeline depth of the flush launch's loop over its work items (Triton
    # software pipelining: the next items' loads in flight while one is computed), 0 or 1 for none
    "flush_stages": 0,
    # fast precision: the input precision of a flush's dots by ring tiles (Helion's dot_precision):
    # "ieee" (fp32 FMAs), "tf32x3" (three TF32 tensor-core passes, about fp32's accuracy) or "tf32" (one
    # pass where the ring's d is exact in TF32, a bf16 or fp16 ring: only launch 1's fp32 ring weights
    # are rounded, to 10 mantissa bits, finer than a bf16 d's 7; "tf32x3" over an fp32 ring)
    "flush_dot": "ieee",
    "k_stages": 1,  # two- and three-launch state kernel: pipeline depth of the loop over checkpoint K chunks
    # two-launch state kernel: pipeline depth of its flush's loop over FK steps of K (the next steps'
    # checkpoint tile and ring weights in flight while one is rebuilt and stored), 0 or 1 for none
    "flush_k_stages": 0,
    # two-launch state kernel: its K loop reads a flush row's checkpoint tile with the L2 hint evict_last
    # and every other row's with evict_first, so that the flush's re-read of the tile hits L2 (1); Nsight
    # Compute found that re-read going to DRAM (run 34); on an H100 its second K loop cost more registers
    # and occupancy than the L2 hits saved (run 35), so no table sets it
    "flush_keep": 0,
    # state kernel: a ring of at most ring_tile positions loaded as one tile beside the checkpoint (1)
    # or walked in a loop before it (0)
    "ring_prefetch": 0,
}

# launches=None picks the ReplaySSM design by ring length: three launches (the flush rows'
# checkpoint write on its own) from this L on, two below it, where a large share of rows flush every
# step and would read their checkpoint twice (H200, run 13 in results/bench/NOTES.md). A device's
# table may move it (its top-level "split_flush_from_l"): on the H100 the two-launch step with handed
# ring weights beat the split one at L = 8 and 16 (run 30).
SPLIT_FLUSH_FROM_L = 8


def split_flush_from(device: torch.device | str) -> int:
    """The ring length from which ``launches=None`` runs three launches on ``device``: its table's
    ``split_flush_from_l``, else ``default.json``'s, else ``SPLIT_FLUSH_FROM_L``."""
    for stem in (device_key(device), "default"):
        doc = _read_doc(stem)
        if "split_flush_from_l" in doc:
            return int(doc["split_flush_from_l"])
    return SPLIT_FLUSH_FROM_L


def load_config(kind: str, device, dtype: torch.dtype, shapes) -> dict:
    """The tuned entry for this kernel / device / dtype / shape class, as a plain dict."""
    stem = device_key(device)
    cfg, _ = lookup(kind, stem, DTYPE_NAMES[dtype], shape_class(kind, shapes))
    return dict(cfg)


def split_config(cfg: dict | helion.Config, dims: tuple[int, ...]) -> tuple[helion.Config, dict]:
    """(``helion.Config``, kernel options) from a table entry or an explicit config."""
    if isinstance(cfg, helion.Config):
        return cfg, dict(KERNEL_OPTIONS)
    cfg = dict(cfg)
    options = {name: cfg.pop(name, default) for name, default in KERNEL_OPTIONS.items()}
    # A block wider than its dimension is pointless; clamp so one table serves every K and V.
    # block_sizes are [V tile] for the standard kernel, [V tile, K chunk] for the ReplaySSM ones.
    cfg["block_sizes"] = [min(bs, dim) for bs, dim in zip(cfg["block_sizes"], dims, strict=False)]
    return helion.Config(**cfg), options
