"""Memory-traffic model of one decode step (section 6 of the semantics doc), in bytes.

Per row and value head, with state element size ``s_S``, ring element sizes ``s_d``/``s_k``/``s_g``,
``hpq = HV / H`` value heads sharing one key ring (``replayssm_ref.formats`` for the formats) and
``G`` log decays per entry (K for KDA, 1 for GDN: ``replayssm_ref.gates``):

    raw              an entry read or written: E = V*s_d + G*s_g + K*s_k/hpq
    predecayed       an entry read: E_r = V*s_d + K*s_k (keys per value head, no gate);
                     written: E_r + 4*K (the prefix sum P_c); plus one gate entry read (4*K) when c > 0
    standard         2*V*K*s_S                             (read + write the state)
    replay @ c       V*K*s_S + c*E_r (+ gate read) + (E_w if no flush else V*K*s_S)

Inputs and outputs (packed q/k/v, gate logits, beta, out) are the same for every implementation and
are added by :func:`io_bytes`. For the raw format the cycle average (cursor ``c`` uniform over
``0..L-1``) is ``B(L) = V*K*s_S*(1 + 1/L) + E*(L/2 + 1/2 - 1/L)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .formats import ring_format as _ring_format
from .gates import gate_channels


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
    ring_format: str = "raw"
    gate: str = "kda"  # "gdn": one log decay per value head

    @property
    def gate_channels(self) -> int:
        return gate_channels(self.gate, self.key_dim)

    @property
    def heads_per_q(self) -> int:
        return self.num_v_heads // self.num_q_heads

    @property
    def state_head_bytes(self) -> int:
        return self.value_dim * self.key_dim * self.state_bytes

    gate_bytes = 4  # a gate ring element: float32 log decays (or their prefix sums)

    @property
    def entry_read_bytes(self) -> float:
        """One live ring entry a step reads, per value head (a shared key counts 1/hpq)."""
        fmt = _ring_format(self.ring_format)
        key = self.key_dim * self.k_bytes / (1 if fmt.keys_per_value_head else self.heads_per_q)
        gate = 0 if fmt.prefix_gate else self.gate_channels * self.gate_bytes
        return self.value_dim * self.d_bytes + key + gate

    @property
    def entry_write_bytes(self) -> float:
        """The entry a non-flush step appends, per value head."""
        fmt = _ring_format(self.ring_format)
        return self.entry_read_bytes + (self.gate_channels * self.gate_bytes if fmt.prefix_gate else 0)

    @property
    def entry_bytes(self) -> float:
        """E of the raw formats (read = written); the predecayed format's read size."""
        return self.entry_read_bytes

    def gate_read_bytes(self, cursor: int) -> float:
        """The prefix format's one gate entry (``P_{c-1}``), read when the ring is not empty."""
        fmt = _ring_format(self.ring_format)
        return self.gate_channels * self.gate_bytes if fmt.prefix_gate and cursor > 0 else 0


def io_bytes(t: TrafficShape) -> float:
    """Inputs and outputs of one row (the same for every implementation)."""
    qkv = 2 * t.num_q_heads * t.key_dim + t.num_v_heads * t.value_dim
    gates = t.num_v_heads * t.gate_channels + t.num_v_heads
    return (qkv + gates) * t.input_bytes + t.num_v_heads * t.value_dim * t.out_bytes


def standard_bytes_per_row(t: TrafficShape) -> float:
    return t.num_v_heads * 2 * t.state_head_bytes + io_bytes(t)


def _replay_head_bytes(t: TrafficShape, cursor: int, flush: bool) -> float:
    per_head = t.state_head_bytes + cursor * t.entry_read_bytes + t.gate_read_bytes(cursor)
    return per_head + (t.state_head_bytes if flush else t.entry_write_bytes)


def replay_bytes_per_row(t: TrafficShape, cursor: int, flush: bool) -> float:
    """One row at ring cursor ``cursor``; ``flush`` for a natural or forced flush."""
    return t.num_v_heads * _replay_head_bytes(t, cursor, flush) + io_bytes(t)


def replay_cycle_bytes_per_row(t: TrafficShape, cache_length: int) -> float:
    """Average over a whole natural flush cycle (cursor 0 .. L-1, flush at L-1)."""
    L = cache_length
    return sum(replay_bytes_per_row(t, c, c == L - 1) for c in range(L)) / L


def model_speedup(t: TrafficShape, cache_length: int) -> float:
    """Standard bytes over replay bytes over a flush cycle, state and rings only (inputs/outputs left
    out), as in the doc."""
    L = cache_length
    cycle = sum(_replay_head_bytes(t, c, c == L - 1) for c in range(L)) / L
    return 2 * t.state_head_bytes / cycle


def spec_round_bytes(t: TrafficShape, cache_length: int, num_drafts: int, accepts) -> dict[str, float]:
    """Bytes per row and round of speculative decoding (``replayssm_ref.spec``), averaged over the rounds
    of ``accepts`` (a list per row of each round's accepted drafts), raw ring format. Per value head,
    ``Sb`` one state head, ``E`` one ring entry:

    * ``replayssm``: verify reads ``Sb`` and the ``c`` live entries and writes ``T`` entries; commit
      moves a tree's accepted entries (``2 n E``, counted for chains and trees alike: an upper bound)
      or, when the next window would not fit, folds (reads ``Sb`` and ``c + n`` entries, writes ``Sb``);
    * ``snapshot``: verify reads ``Sb`` and writes ``T Sb``; commit reads and writes ``Sb`` when ``n > 0``;
    * ``peer_commit`` (sglang's KDA commit, every round with ``n > 0``): reads ``Sb`` and ``n`` entries,
      writes ``Sb``.

    Inputs and outputs of the ``T`` drafts (``io_bytes`` each) are added to the verifies."""
    L, T, Sb, E = cache_length, num_drafts, t.state_head_bytes, t.entry_read_bytes
    io = T * io_bytes(t)
    total = {"replayssm": 0.0, "snapshot": 0.0, "peer_commit": 0.0}
    rounds = 0
    for row in accepts:
        c = 0
        for n in row:
            replay = Sb + c * E + T * t.entry_write_bytes
            if c + n + T > L:
                replay += 2 * Sb + (c + n) * E
                c = 0
            else:
                replay += 2 * n * E
                c += n
            total["replayssm"] += t.num_v_heads * replay + io
            total["snapshot"] += t.num_v_heads * (Sb + T * Sb + (2 * Sb if n > 0 else 0)) + io
            total["peer_commit"] += t.num_v_heads * ((2 * Sb + n * E) if n > 0 else 0)
            rounds += 1
    return {k: v / max(rounds, 1) for k, v in total.items()}
