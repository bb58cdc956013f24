"""Eager PyTorch reference of KDA and Gated DeltaNet decode and of ReplaySSM's flush/replay semantics."""

from .cache import ReplaySSMCache
from .gates import gdn_log_decay, kda_log_decay
from .recurrence import gdn_recurrent_decode_step, recurrent_decode_step
from .replay import (
    advance_write_pos,
    gdn_replayssm_decode_step,
    materialize_state,
    reconstruct_state,
    replayssm_decode_step,
)
from .validation import check_runtime_values

__all__ = [
    "ReplaySSMCache",
    "advance_write_pos",
    "check_runtime_values",
    "gdn_log_decay",
    "gdn_recurrent_decode_step",
    "gdn_replayssm_decode_step",
    "kda_log_decay",
    "materialize_state",
    "reconstruct_state",
    "recurrent_decode_step",
    "replayssm_decode_step",
]
