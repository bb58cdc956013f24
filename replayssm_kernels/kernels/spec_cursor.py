"""After a speculative commit (``kernels.spec_commit``): each valid row's cursor moves to ``c + n``, or
to 0 where the commit folded; other rows keep theirs. One program per block of rows."""

from __future__ import annotations

import helion.language as hl
import torch

from .common import args_record


def spec_cursor_body(
    ssm_state_indices: torch.Tensor,  # [B]
    write_pos: torch.Tensor,  # [B] int32, read and written
    num_accepted: torch.Tensor,  # [B] int32
    force_flush: torch.Tensor | None,  # [B] int32
    num_slots: int,
    cache_length: int,
    T: hl.constexpr,
    HAS_FORCE: hl.constexpr,
) -> torch.Tensor:
    B = write_pos.size(0)
    for tile_b in hl.tile(B):
        index = ssm_state_indices[tile_b]
        c = write_pos[tile_b]
        n = num_accepted[tile_b]
        valid = (index >= 0) & (index < num_slots) & (c >= 0) & (c + T <= cache_length) & (n >= 0) & (n <= T)
        fold = c + n + T > cache_length
        if HAS_FORCE:
            fold = fold | (force_flush[tile_b] != 0)
        write_pos[tile_b] = torch.where(valid, torch.where(fold, c * 0, c + n), c)
    return write_pos


SpecCursorArgs = args_record(spec_cursor_body)
