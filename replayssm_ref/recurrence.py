"""Standard decode (KDA and GDN): read the state, decay it, apply the delta rule, write it back."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .gates import compute_dtype, kda_log_decay
from .validation import DecodeShapes, validate_decode_inputs

L2NORM_EPS = 1e-6


@dataclass
class Token:
    """One decode token per row, split per head and upcast to the compute dtype.

    q, k  [B, HV, K]   expanded from the H q/k heads to the HV value heads (q pre-scaled)
    k_qk  [B, H, K]    k per q/k head (what ReplaySSM stores in its k ring)
    v     [B, HV, V]
    g     [B, HV, K]   log decay;  alpha = exp(g)  (GDN: [B, HV, 1], broadcast over K)
    beta  [B, HV]
    """

    q: torch.Tensor
    k: torch.Tensor
    k_qk: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor


def prepare_token(mixed_qkv, b, A_log, scale, shapes: DecodeShapes, cd, use_qk_l2norm, lower_bound) -> Token:
    """Unpack ``mixed_qkv`` and the gates of one token (shared by both decode steps)."""
    B, H, HV, K, V = shapes.batch, shapes.num_q_heads, shapes.num_v_heads, shapes.key_dim, shapes.value_dim
    x = mixed_qkv.to(cd)
    q = x[:, : H * K].reshape(B, H, K)
    k = x[:, H * K : 2 * H * K].reshape(B, H, K)
    v = x[:, 2 * H * K :].reshape(B, HV, V)
    if use_qk_l2norm:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + L2NORM_EPS)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + L2NORM_EPS)
    hpq = shapes.heads_per_q  # value head j reads q/k head j // hpq
    g = kda_log_decay(shapes.a, shapes.dt_bias, A_log, lower_bound=lower_bound).to(cd)
    beta = torch.sigmoid(b.to(cd))
    return Token(
        q=(q * scale).repeat_interleave(hpq, dim=1),
        k=k.repeat_interleave(hpq, dim=1),
        k_qk=k,
        v=v,
        g=g,
        beta=beta,
    )


def delta_rule(S: torch.Tensor, tok: Token, rows: torch.Tensor):
    """One KDA token on decayed-able states ``S [R, HV, V, K]`` of ``rows``; returns (o, S_new).

    S' = S diag(e^g);  u = beta (v - S' k);  S_new = S' + u k^T;  o = S_new q.
    """
    alpha = torch.exp(tok.g[rows])
    S = S * alpha[:, :, None, :]
    k, q = tok.k[rows], tok.q[rows]
    u = tok.beta[rows, :, None] * (tok.v[rows] - torch.einsum("rhvk,rhk->rhv", S, k))
    S = S + u[..., :, None] * k[..., None, :]
    return torch.einsum("rhvk,rhk->rhv", S, q), S


def valid_rows(ssm_state_indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(row numbers, slot numbers) of the non-padding rows."""
    rows = (ssm_state_indices >= 0).nonzero().squeeze(1)
    return rows, ssm_state_indices[rows].long()


def recurrent_decode_step(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Standard KDA decode of one token per row; updates ``initial_state [slots, HV, V, K]`` in place.

    Padding rows (negative index) get ``out = 0`` and touch no state. Returns ``(out, initial_state)``.
    """
    return _standard_step(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, use_qk_l2norm_in_kernel,
        lower_bound, gate="kda", check_values=check_values,
    )  # fmt: skip


def gdn_recurrent_decode_step(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    use_qk_l2norm_in_kernel: bool = False,
    *,
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Standard Gated DeltaNet decode: :func:`recurrent_decode_step` with one log decay per value head,
    ``g = -exp(A_log) softplus(a + dt_bias)`` from ``a [B, HV]`` and ``dt_bias [HV]``."""
    return _standard_step(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, use_qk_l2norm_in_kernel,
        None, gate="gdn", check_values=check_values,
    )  # fmt: skip


def _standard_step(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, use_qk_l2norm_in_kernel,
    lower_bound, *, gate, check_values,
):  # fmt: skip
    shapes = validate_decode_inputs(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, gate=gate,
        check_values=check_values,
    )  # fmt: skip

    cd = compute_dtype(mixed_qkv, initial_state)
    tok = prepare_token(mixed_qkv, b, A_log, scale, shapes, cd, use_qk_l2norm_in_kernel, lower_bound)
    rows, slots = valid_rows(ssm_state_indices)

    o, S_new = delta_rule(initial_state[slots].to(cd), tok, rows)

    out.zero_()
    out[rows, 0] = o.to(out.dtype)
    initial_state[slots] = S_new.to(initial_state.dtype)
    return out, initial_state
