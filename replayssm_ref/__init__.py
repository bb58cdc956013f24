"""Eager PyTorch reference of KDA decode and of ReplaySSM's flush/replay semantics."""

from .cache import ReplaySSMCache
from .gates import kda_log_decay
from .recurrence import recurrent_decode_step
from .replay import advance_write_pos, materialize_state, reconstruct_state, replayssm_decode_step
from .validation import check_runtime_values

__all__ = [
    "ReplaySSMCache",
    "advance_write_pos",
    "check_runtime_values",
    "kda_log_decay",
    "materialize_state",
    "reconstruct_state",
    "recurrent_decode_step",
    "replayssm_decode_step",
]
