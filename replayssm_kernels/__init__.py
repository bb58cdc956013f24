"""Helion kernels for ReplaySSM decode of Kimi Delta Attention, with the reference's signatures."""

from .kda_decode import (
    PRECISIONS,
    helion_fused_recurrent_kda_packed_decode,
    helion_fused_recurrent_kda_replayssm_decode,
)

__all__ = [
    "PRECISIONS",
    "helion_fused_recurrent_kda_packed_decode",
    "helion_fused_recurrent_kda_replayssm_decode",
]
