"""Kernel options: the choices a tuned table entry bakes into a ReplaySSM step besides Helion's config.

A table entry (``configs/<device>.json``) is a ``helion.Config`` (``block_sizes``, ``num_warps``,
``num_stages``) plus the fields of :class:`KernelOptions`. ``split_entry`` separates the two and checks
the options against the design the entry is for: an unknown option, or one the design does not have,
is a ``ValueError`` that names it. Every option here is selected by at least one committed table;
options that lost their measurement are gone from code and listed in ``docs/lab_notes.md``.

The designs (``launches=`` of the decode call, ``kind`` of a table key):

* ``"standard"``: the standard decode kernel, one launch (also ReplaySSM at L = 1).
* ``"replayssm"`` (two launches): the ring weights (launch 1), then the state launch, which writes
  the output, appends ``d`` and, on flush rows, rewrites the checkpoint.
* ``"replayssm_fused"`` (one launch, ``kernels.fused``): every program computes its own ring
  coefficients; for rings whose entry weights need no per-channel work (GDN, the predecayed format).
* ``"replayssm_split"`` (three launches): the same, with the flush rows' checkpoint write moved to a
  third launch, one program per (row, head, V tile), or ``flush_programs`` programs sharing the
  flushing rows' work.
* ``"spec_verify"``, ``"spec_commit"``, ``"snapshot_verify"``: speculative decoding's state-side
  launches (``replayssm_kernels.spec``), a Helion config each.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import helion

KINDS = ("standard", "replayssm", "replayssm_fused", "replayssm_split", "spec_verify", "spec_commit", "snapshot_verify")
OPTION_KINDS = ("replayssm", "replayssm_fused", "replayssm_split")  # the others take a Helion config only


@dataclass(frozen=True)
class KernelOptions:
    """The kernel options of one table entry. Defaults are the untuned fallback's."""

    ring_chunk: int = 8
    """Ring positions per unrolled chunk of launch 1's walk and of a walked flush (the largest power of
    two at most this that divides L)."""
    prep_stages: int = 0
    """Software-pipelining depth of launch 1's loop over ring chunks (0 or 1: none)."""
    k_stages: int = 1
    """Software-pipelining depth of the state launch's loop over checkpoint K chunks (0 or 1: none)."""
    flush_block_k: int = 32
    """K channels a flush rebuilds per step (bounds the flush branch's registers)."""
    flush_tiles: int = 0
    """Flush by ring tiles of up to this many positions (at least 16: a dot's side), one dot per tile,
    instead of walking the ring ``ring_chunk`` positions at a time (0). Needs ``flush_weights`` in a
    two-launch step and ``flush_programs`` in a three-launch one."""
    flush_weights: int = 0
    """Launch 1 stores the ring weights ``W_i alpha kappa_i`` of flush rows (a ``[B, HV, L, K]`` fp32
    scratch), so a flush tile is two loads and a dot, with no gate, scan or exp (1)."""
    flush_k_stages: int = 0
    """Two launches: software-pipelining depth of the state launch's flush loop over K steps."""
    flush_block_v: int = 0
    """Three launches: the flush launch's V tile (0: the state launch's)."""
    flush_warps: int = 0
    """Three launches: the flush launch's warps (0: the state launch's)."""
    flush_programs: int = 0
    """Three launches, with ``flush_tiles``: the flush launch as this many programs sharing the
    flushing rows' work, instead of one program per (row, head, V tile) (0)."""
    flush_overlap: int = 0
    """Three launches, with ``flush_programs``: the flush launch takes flush rows whole (their output
    too), the state launch skips them, and the two run at once on two streams: 1, or 2 for a
    high-priority second stream."""

    def check(self, kind: str) -> None:
        """Raise ``ValueError`` for a value out of range or an option the design ``kind`` lacks."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"kernel option `{f.name}` must be a non-negative int; got {value!r}")
        if self.ring_chunk < 1:
            raise ValueError(f"kernel option `ring_chunk` must be at least 1; got {self.ring_chunk}")
        if self.flush_block_k < 1:
            raise ValueError(f"kernel option `flush_block_k` must be at least 1; got {self.flush_block_k}")
        if self.flush_weights not in (0, 1):
            raise ValueError(f"kernel option `flush_weights` is 0 or 1; got {self.flush_weights}")
        if self.flush_overlap not in (0, 1, 2):
            raise ValueError(f"kernel option `flush_overlap` is 0, 1 or 2; got {self.flush_overlap}")
        set_ = {f.name for f in dataclasses.fields(self) if getattr(self, f.name) != f.default}
        if kind not in OPTION_KINDS and set_:
            raise ValueError(f"the {kind} kernel takes no kernel options; got {sorted(set_)}")
        fused_has = {"ring_chunk", "k_stages", "flush_block_k"}
        if kind == "replayssm_fused" and set_ - fused_has:
            raise ValueError(f"kernel options {sorted(set_ - fused_has)} are not the one-launch design's (it takes "
                             f"{sorted(fused_has)})")  # fmt: skip
        split_only = {"flush_block_v", "flush_warps", "flush_programs", "flush_overlap"} & set_
        if kind == "replayssm" and split_only:
            raise ValueError(f"kernel options {sorted(split_only)} are for three launches (replayssm_split) only")
        if kind == "replayssm_split" and "flush_k_stages" in set_:
            raise ValueError("kernel option `flush_k_stages` is for two launches (replayssm) only")
        if kind == "replayssm" and bool(self.flush_tiles) != bool(self.flush_weights):
            raise ValueError("two launches: `flush_tiles` and `flush_weights` go together (a flush by ring tiles "
                             "reads launch 1's weights)")  # fmt: skip
        if self.flush_programs and not self.flush_tiles:
            raise ValueError("kernel option `flush_programs` needs `flush_tiles` (its items flush by ring tiles)")
        if kind == "replayssm_split" and self.flush_weights and not self.flush_programs:
            raise ValueError("three launches: `flush_weights` needs `flush_programs` (only that launch reads them)")
        if kind == "replayssm_split" and self.flush_tiles and not self.flush_programs:
            raise ValueError("three launches: `flush_tiles` needs `flush_programs` (the per-row flush walks the ring)")
        if self.flush_overlap and not self.flush_programs:
            raise ValueError("kernel option `flush_overlap` needs `flush_programs`")


OPTION_NAMES = tuple(f.name for f in dataclasses.fields(KernelOptions))
HELION_FIELDS = ("block_sizes", "num_warps", "num_stages")


@dataclass(frozen=True)
class Entry:
    """One table entry, split: Helion's config and the kernel options."""

    config: helion.Config
    options: KernelOptions


def split_entry(kind: str, entry: dict | helion.Config, dims: tuple[int, ...]) -> Entry:
    """A table entry (or an explicit ``helion.Config``, which takes default options) as an :class:`Entry`.

    ``dims`` are the dimensions ``block_sizes`` tile, ``(V,)`` for the standard kernel and ``(V, K)``
    for the ReplaySSM ones: a block wider than its dimension is clamped, so one table serves every
    K and V. Raises ``ValueError`` for an unknown field or a conflicting option."""
    if kind not in KINDS:
        raise ValueError(f"kernel kind must be one of {KINDS}; got {kind!r}")
    if isinstance(entry, helion.Config):
        fields, options = dict(entry), KernelOptions()
    else:
        unknown = set(entry) - set(HELION_FIELDS) - set(OPTION_NAMES)
        if unknown:
            raise ValueError(
                f"unknown field(s) {sorted(unknown)} in a `{kind}` table entry; Helion fields are "
                f"{HELION_FIELDS} and kernel options {OPTION_NAMES} (options that lost their measurement "
                "are listed in docs/lab_notes.md)"
            )
        fields = {k: v for k, v in entry.items() if k in HELION_FIELDS}
        options = KernelOptions(**{k: v for k, v in entry.items() if k in OPTION_NAMES})
    options.check(kind)
    if "block_sizes" in fields:
        fields["block_sizes"] = [min(bs, dim) for bs, dim in zip(fields["block_sizes"], dims, strict=False)]
    return Entry(helion.Config(**fields), options)
