"""Ring formats: what a ReplaySSM ring entry holds, by name.

Every format keeps the same three rings and cursor contract (entries ``i < c`` live, flush at
``c = L - 1`` or on demand); they differ in what the key and gate rings hold:

``raw`` (the default; sglang's Helion and Triton kernels)
    ``k_cache [slots, H, L, K]``: the normalised key, one per q/k head;
    ``g_cache [slots, HV, L, K]`` float32: each entry's own log decay ``gamma_i``.
    A step rebuilds the weights ``W_i = exp(sum_{i<m<c} gamma_m)`` from all c gate entries.
``predecayed`` (bounded gate only)
    ``k_cache [slots, HV, L, K]``: ``kappa_i * exp(-P_i)``, per *value* head, with ``P_i`` the log
    decay accumulated from the checkpoint through entry ``i``;
    ``g_cache [slots, HV, L, K]`` float32: the prefix sums ``P_i`` themselves.
    Then ``S_rec = (S0 + sum_{i<c} d_i kappa~_i^T) diag(exp(P_{c-1}))``: a step reads one gate entry,
    not c, and takes no exponential per entry. ``exp(-P_i)`` grows with the decay, so the format needs
    the bounded gate (``g >= lower_bound``) and ``(L - 1) |lower_bound| <= MAX_LOG_GROWTH``.

(A bf16 gate ring, ``bf16_gate``, was measured and deleted: <1% faster on an H100 and 1000x the
error of ``raw`` with fp32 rings; ``docs/lab_notes.md``, row 25.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# exp(80) ~ 5.5e34: a predecayed key stays a finite float32 / bfloat16 (max ~3.4e38 = e^88.7) with
# e^8 to spare for the key's own norm, and exp(-80) stays a normal float32.
MAX_LOG_GROWTH = 80.0


@dataclass(frozen=True)
class RingFormat:
    """What one ring format stores; see the module doc for the math."""

    name: str
    keys_per_value_head: bool  # k_cache has HV heads (else H, shared by a GQA group)
    prefix_gate: bool  # g_cache holds prefix sums P_i (else each entry's own gamma_i)
    needs_bounded_gate: bool

    def key_heads(self, num_q_heads: int, num_v_heads: int) -> int:
        return num_v_heads if self.keys_per_value_head else num_q_heads

    @staticmethod
    def gate_dtypes(state_dtype: torch.dtype) -> tuple[torch.dtype, ...]:
        """The g_cache dtypes accepted beside a state of ``state_dtype``: float32 (and float64 beside a
        float64 state): log decays summed over the ring lose too much in 16 bits."""
        return (torch.float32, torch.float64) if state_dtype is torch.float64 else (torch.float32,)

    def check_gate(self, lower_bound: float | None, cache_length: int) -> None:
        """A ``ValueError`` where this format cannot hold the gate's decay."""
        if not self.needs_bounded_gate:
            return
        if lower_bound is None or not math.isfinite(lower_bound) or lower_bound > 0:
            raise ValueError(
                f"ring_format={self.name!r} needs the bounded gate (a finite lower_bound <= 0); got "
                f"lower_bound={lower_bound!r}: with the softplus gate exp(-P) can overflow. Use "
                "ring_format='raw' (pick_ring_format chooses for you)"
            )
        growth = (cache_length - 1) * abs(lower_bound)
        if growth > MAX_LOG_GROWTH:
            raise ValueError(
                f"ring_format={self.name!r} needs (L - 1) * |lower_bound| <= {MAX_LOG_GROWTH:g} so that "
                f"predecayed keys stay finite; got ({cache_length} - 1) * {abs(lower_bound):g} = {growth:g}. "
                "Use a shorter ring or ring_format='raw'"
            )


RAW = RingFormat("raw", keys_per_value_head=False, prefix_gate=False, needs_bounded_gate=False)
PREDECAYED = RingFormat("predecayed", keys_per_value_head=True, prefix_gate=True, needs_bounded_gate=True)
RING_FORMATS = {f.name: f for f in (RAW, PREDECAYED)}


def ring_format(name: str | RingFormat) -> RingFormat:
    """The format called ``name`` (a :class:`RingFormat` passes through)."""
    if isinstance(name, RingFormat):
        return name
    if name not in RING_FORMATS:
        raise ValueError(f"`ring_format` must be one of {sorted(RING_FORMATS)}; got {name!r}")
    return RING_FORMATS[name]


def pick_ring_format(*, lower_bound: float | None, cache_length: int) -> str:
    """The leanest format the gate allows: ``predecayed`` under its conditions, else ``raw``."""
    try:
        PREDECAYED.check_gate(lower_bound, cache_length)
    except ValueError:
        return RAW.name
    return PREDECAYED.name
