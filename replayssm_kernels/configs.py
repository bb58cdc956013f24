"""Tuned kernel configs as data: ``configs/<device>.json``, keyed by design / state dtype / shape class.

A file looks like::

    {"device": "NVIDIA H100 80GB HBM3", "tuned_by": "<one line: the command that tuned it>",
     "split_flush_from_l": 32, "one_launch_up_to_l": 8, "gdn_one_launch_up_to_batch": 1,
     "configs": {"replayssm/float32/K128-V128-LB16": {"block_sizes": [64, 32], "num_warps": 2, ...}}}

Lookup falls back from the exact shape class to ``<kind>/<dtype>/*`` to ``<kind>/*/*``, and from the
device's file to ``default.json``. Every entry is checked when its table is read (``options``).
Nothing here autotunes; ``python -m replayssm_kernels.tools.tune`` writes these files on a GPU.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import torch

from .options import KINDS, Entry, split_entry

CONFIG_DIR = Path(__file__).parent / "configs"
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
# launches=None runs three launches from this ring length on where a device's table sets no
# "split_flush_from_l" (H200, run 13 in docs/lab_notes.md); two below it.
SPLIT_FLUSH_FROM_L = 8


def ring_block(cache_length: int) -> int:
    """The ring length rounded up to a power of two: the cache-length part of a shape class."""
    return 1 << (cache_length - 1).bit_length()


def device_key(device: torch.device | str) -> str:
    """File stem for a device: ``nvidia_h100_80gb_hbm3`` for an H100 SXM, ``cpu`` on the CPU."""
    device = torch.device(device)
    if device.type != "cuda":
        return device.type
    return stem_of(torch.cuda.get_device_name(device))


def stem_of(gpu_name: str) -> str:
    """The table file stem of a GPU's name (``NVIDIA H100 80GB HBM3`` -> ``nvidia_h100_80gb_hbm3``)."""
    return re.sub(r"[^a-z0-9]+", "_", gpu_name.lower()).strip("_")


def table_stem(device: torch.device | str) -> str:
    """The table file stem for a device, or ``device`` itself where it names a table (``plots`` reads a
    sweep's design choices by the GPU's stem, off that GPU)."""
    if isinstance(device, str) and (CONFIG_DIR / f"{device}.json").exists():
        return device
    return device_key(device)


def shape_class(kind: str, key_dim: int, value_dim: int, cache_length: int) -> str:
    label = f"K{key_dim}-V{value_dim}"
    if kind != "standard":
        label += f"-LB{ring_block(cache_length)}"
    return label


@functools.cache
def read_table(stem: str) -> dict:
    """A table file as a dict (empty if absent), every entry checked: a bad entry raises ``ValueError``
    naming the file and key."""
    path = CONFIG_DIR / f"{stem}.json"
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    for key, entry in doc.get("configs", {}).items():
        kind = key.split("/")[0]
        try:
            split_entry(kind, entry, (1 << 30, 1 << 30))
        except ValueError as e:
            raise ValueError(f"{path.name}: entry {key!r}: {e}") from None
    return doc


def lookup(kind: str, device_stem: str, dtype_name: str, cls: str) -> tuple[dict, str]:
    """(table entry, ``'file:key'`` it came from)."""
    if kind not in KINDS:
        raise ValueError(f"kernel kind must be one of {KINDS}; got {kind!r}")
    for stem in (device_stem, "default"):
        table = read_table(stem).get("configs", {})
        for key in (f"{kind}/{dtype_name}/{cls}", f"{kind}/{dtype_name}/*", f"{kind}/*/*"):
            if key in table:
                return table[key], f"{stem}:{key}"
    raise LookupError(f"no config for {kind}/{dtype_name}/{cls} in {CONFIG_DIR} (default.json is missing?)")


def load_entry(kind: str, device, dtype: torch.dtype, key_dim: int, value_dim: int, cache_length: int) -> Entry:
    """The tuned entry for this design / device / state dtype / shape, split and checked."""
    entry, _ = lookup(kind, device_key(device), DTYPE_NAMES[dtype], shape_class(kind, key_dim, value_dim, cache_length))
    dims = (value_dim,) if kind == "standard" else (value_dim, key_dim)
    return split_entry(kind, entry, dims)


def split_flush_from(device: torch.device | str) -> int:
    """The ring length from which ``launches=None`` runs three launches on ``device``: its table's
    ``split_flush_from_l``, else ``default.json``'s, else ``SPLIT_FLUSH_FROM_L``."""
    for stem in (table_stem(device), "default"):
        doc = read_table(stem)
        if "split_flush_from_l" in doc:
            return int(doc["split_flush_from_l"])
    return SPLIT_FLUSH_FROM_L


def one_launch_rule(device: torch.device | str) -> tuple[int, int]:
    """``(up to L, GDN up to batch)``: where ``launches=None`` runs the one-launch design on ``device``:
    the predecayed format at ``L <=`` the first, Gated DeltaNet's raw ring there too when the batch is at
    most the second. From the device's table (``one_launch_up_to_l``, ``gdn_one_launch_up_to_batch``),
    else ``default.json``'s, else never (0, 0)."""
    for stem in (table_stem(device), "default"):
        doc = read_table(stem)
        if "one_launch_up_to_l" in doc:
            return int(doc["one_launch_up_to_l"]), int(doc.get("gdn_one_launch_up_to_batch", 0))
    return 0, 0
