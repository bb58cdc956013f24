"""ReplaySSMCache: rings and cursors allocated from the model's sizes, so they cannot be mis-sized."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .formats import ring_format as _ring_format
from .gates import check_gate_name


@dataclass
class ReplaySSMCache:
    """The three rings and the per-row cursors for ``num_slots`` requests, in one ring format
    (``replayssm_ref.formats``; ``raw`` unless asked):

    d_cache    [slots, HV, L, V]   deltas u, in ``cache_dtype``
    k_cache    [slots, H,  L, K]   keys, one per q/k head, in ``cache_dtype`` (``predecayed``: [slots, HV, L, K])
    g_cache    [slots, HV, L, K]   per-channel log decays, float32 (float64 for a float64 cache;
                                   ``predecayed``: their prefix sums)
                                   (``gate="gdn"``: [slots, HV, L], one per value head)
    write_pos  [batch] int32       committed entries per *row* (not per slot), starts at 0

    The checkpoint (``initial_state [slots, HV, V, K]``) stays with the caller, as in a standard decode.
    """

    d_cache: torch.Tensor
    k_cache: torch.Tensor
    g_cache: torch.Tensor
    write_pos: torch.Tensor
    ring_format: str = "raw"
    gate: str = "kda"  # replayssm_ref.gates

    @classmethod
    def allocate(
        cls,
        *,
        num_slots: int,
        batch: int,
        num_q_heads: int,
        num_v_heads: int,
        key_dim: int,
        value_dim: int,
        cache_length: int,
        cache_dtype: torch.dtype = torch.bfloat16,
        device: torch.device | str = "cpu",
        fill: float = float("nan"),
        ring_format: str = "raw",
        gate: str = "kda",
    ) -> ReplaySSMCache:
        """Allocate rings filled with ``fill`` (NaN by default: stale entries must never be read), for
        the ``gate`` of ``replayssm_ref.gates`` (Gated DeltaNet: ``"gdn"``, raw format only)."""
        fmt = _ring_format(ring_format)
        check_gate_name(gate)
        if gate == "gdn" and fmt.name != "raw":
            raise ValueError(f"`ring_format` must be 'raw' for Gated DeltaNet; got {fmt.name!r}")
        if num_v_heads % num_q_heads:
            raise ValueError(f"num_v_heads ({num_v_heads}) must be a multiple of num_q_heads ({num_q_heads})")
        if cache_length < 1:
            raise ValueError(f"cache_length must be at least 1; got {cache_length}")
        g_dtype = torch.float64 if cache_dtype is torch.float64 else torch.float32

        def ring(heads, dim, dtype):
            shape = (num_slots, heads, cache_length) + ((dim,) if dim else ())
            return torch.full(shape, fill, dtype=dtype, device=device)

        return cls(
            d_cache=ring(num_v_heads, value_dim, cache_dtype),
            k_cache=ring(fmt.key_heads(num_q_heads, num_v_heads), key_dim, cache_dtype),
            g_cache=ring(num_v_heads, key_dim if gate == "kda" else 0, g_dtype),
            write_pos=torch.zeros(batch, dtype=torch.int32, device=device),
            ring_format=fmt.name,
            gate=gate,
        )

    @property
    def cache_length(self) -> int:
        return self.d_cache.shape[2]

    def reset_rows(self, rows: torch.Tensor | list[int] | None = None) -> None:
        """Empty the rings of the given rows (all when ``None``): call whenever their checkpoint is
        (re)written from outside, e.g. after prefill or a prefix-cache copy. Ring data is left stale."""
        if rows is None:
            self.write_pos.zero_()
        else:
            self.write_pos[torch.as_tensor(rows, device=self.write_pos.device, dtype=torch.long)] = 0

    def reset_slots(self, slots, ssm_state_indices: torch.Tensor) -> None:
        """Empty the rings of every row whose slot (``ssm_state_indices``) is in ``slots``: the call to
        make after writing those slots' checkpoints from outside (prefill, prefix-cache copy)."""
        slots = torch.as_tensor(slots, device=ssm_state_indices.device, dtype=ssm_state_indices.dtype)
        hit = torch.isin(ssm_state_indices, slots) & (ssm_state_indices >= 0)
        self.write_pos.masked_fill_(hit.to(self.write_pos.device), 0)

    def nbytes_per_slot(self) -> int:
        """Ring bytes held per slot (d + k + g)."""
        return sum(t[0].numel() * t.element_size() for t in (self.d_cache, self.k_cache, self.g_cache))
