"""Memory-traffic model of one decode step (section 6 of the semantics doc), in bytes.

Per row and value head, with state element size ``s_S``, ring element sizes ``s_d``/``s_k`` and
``hpq = HV / H`` value heads sharing one key ring:

    ring entry  E = V*s_d + 4*K + K*s_k/hpq           (delta, fp32 gate, shared key)
    standard    2*V*K*s_S                             (read + write the state)
    replay @ c  V*K*s_S + c*E + (E if no flush else V*K*s_S)

Inputs and outputs (packed q/k/v, gate logits, beta, out) are the same for every implementation and
are added by :func:`io_bytes`. The cycle average (cursor ``c`` uniform over ``0..L-1``) is
``B(L) = V*K*s_S*(1 + 1/L) + E*(L/2 + 1/2 - 1/L)``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrafficShape:
    num_q_heads: int
    num_v_heads: int
    key_dim: int
    value_dim: int
    state_bytes: int = 4  # element size of the state / checkpoint
    d_bytes: int = 2  # element size of d_cache
    k_bytes: int = 2  # element size of k_cache
    input_bytes: int = 2  # mixed_qkv, a, b
    out_bytes: int = 2

    @property
    def heads_per_q(self) -> int:
        return self.num_v_heads // self.num_q_heads

    @property
    def state_head_bytes(self) -> int:
        return self.value_dim * self.key_dim * self.state_bytes

    @property
    def entry_bytes(self) -> float:
        """E: one ring entry per value head (the key is shared by ``hpq`` value heads)."""
        return self.value_dim * self.d_bytes + 4 * self.key_dim + self.key_dim * self.k_bytes / self.heads_per_q


def io_bytes(t: TrafficShape) -> float:
    """Inputs and outputs of one row (the same for every implementation)."""
    qkv = 2 * t.num_q_heads * t.key_dim + t.num_v_heads * t.value_dim
    gates = t.num_v_heads * t.key_dim + t.num_v_heads
    return (qkv + gates) * t.input_bytes + t.num_v_heads * t.value_dim * t.out_bytes


def standard_bytes_per_row(t: TrafficShape) -> float:
    return t.num_v_heads * 2 * t.state_head_bytes + io_bytes(t)


def replay_bytes_per_row(t: TrafficShape, cursor: int, flush: bool) -> float:
    """One row at ring cursor ``cursor``; ``flush`` for a natural or forced flush."""
    per_head = t.state_head_bytes + cursor * t.entry_bytes
    per_head += t.state_head_bytes if flush else t.entry_bytes
    return t.num_v_heads * per_head + io_bytes(t)


def replay_cycle_bytes_per_row(t: TrafficShape, cache_length: int) -> float:
    """Average over a whole natural flush cycle (cursor 0 .. L-1, flush at L-1)."""
    L = cache_length
    return sum(replay_bytes_per_row(t, c, c == L - 1) for c in range(L)) / L


def model_speedup(t: TrafficShape, cache_length: int) -> float:
    """Standard bytes over replay bytes, state and rings only (inputs/outputs left out), as in the doc."""
    L, S, E = cache_length, t.state_head_bytes, t.entry_bytes
    return 2 * S / (S * (1 + 1 / L) + E * (L / 2 + 1 / 2 - 1 / L))
