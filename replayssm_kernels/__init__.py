"""Helion kernels for ReplaySSM decode of Kimi Delta Attention and Gated DeltaNet, with the reference's
signatures.

``decode`` holds the two public calls, ``plan`` turns a call into launches, ``kernels/`` holds one
Helion body per launch, ``configs/`` the tuned tables (``options`` their typed kernel options), and
``tools/`` the measuring commands (bench, tune, gpu_check, profile, codegen, ceiling, plots).
"""

from .decode import (
    helion_fused_recurrent_gdn_packed_decode,
    helion_fused_recurrent_gdn_replayssm_decode,
    helion_fused_recurrent_kda_packed_decode,
    helion_fused_recurrent_kda_replayssm_decode,
)

__all__ = [
    "helion_fused_recurrent_gdn_packed_decode",
    "helion_fused_recurrent_gdn_replayssm_decode",
    "helion_fused_recurrent_kda_packed_decode",
    "helion_fused_recurrent_kda_replayssm_decode",
]
