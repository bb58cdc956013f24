"""ReplaySSM decode: rebuild the state from checkpoint + ring, emit, then append or flush.

The ring of slot ``s`` holds, for entries ``i < c = write_pos[row]``, the delta ``d_i [HV, V]``, the
key ``kappa_i [H, K]`` and the per-channel log decay ``gamma_i [HV, K]`` of past tokens. The true
pre-token state is the checkpoint ``S0`` advanced by those entries, which per K column is

    S_rec = S0 diag(e^Gamma) + sum_{i<c} d_i (W_i * kappa_i)^T,
    Gamma = sum_{i<c} gamma_i,   W_i = exp(sum_{i<m<c} gamma_m)   (so W_{c-1} = 1).

Entries at ``i >= c`` are stale and never read (they may hold anything, NaN included). Other ring
formats (``replayssm_ref.formats``) store the same history differently: ``predecayed`` keeps
``kappa~_i = kappa_i exp(-P_i)`` and the prefix sums ``P_i`` of gamma, so that
``S_rec = (S0 + sum_{i<c} d_i kappa~_i^T) diag(exp(P_{c-1}))``.

Gated DeltaNet (``gdn_replayssm_decode_step``) is the same with one log decay per value head:
``g_cache [slots, HV, L]`` is read as ``[slots, HV, L, 1]`` and every gate broadcasts over K.
"""

from __future__ import annotations

import torch

from .formats import ring_format as _ring_format
from .gates import compute_dtype
from .recurrence import Token, prepare_token, valid_rows
from .validation import validate_replayssm_inputs


def reconstruct_state(S0, d, kappa, gamma, c, *, prefix_gate=False):
    """Rebuild ``S_rec [R, HV, V, K]`` from checkpoints and rings of ``R`` rows.

    S0 [R, HV, V, K], d [R, HV, L, V], kappa [R, HV, L, K] (already expanded to HV heads),
    gamma [R, HV, L, K], c [R] committed entries per row. All in the compute dtype. With
    ``prefix_gate`` (the ``predecayed`` format) kappa holds predecayed keys and gamma prefix sums.
    """
    L = d.shape[2]
    live = (torch.arange(L, device=c.device)[None, :] < c[:, None])[:, None, :, None]  # [R, 1, L, 1]
    if prefix_gate:
        return _reconstruct_predecayed(S0, d, kappa, gamma, c, live)
    gamma = torch.where(live, gamma, torch.zeros((), dtype=gamma.dtype, device=gamma.device))
    # log W_i = sum_{i<m<c} gamma_m, taken as a suffix sum minus gamma_i rather than Gamma - P_i: the
    # entries that matter (W near 1, i near c) then sum a few small terms instead of cancelling two
    # large ones, which in float32 cost ~5x the recurrence's own error at L = 64.
    suffix = torch.flip(torch.cumsum(torch.flip(gamma, dims=[2]), dim=2), dims=[2])  # sum_{m>=i}
    total = suffix[:, :, :1, :]  # Gamma (masked entries add 0)
    weights = torch.where(live, torch.exp(suffix - gamma), torch.zeros((), dtype=gamma.dtype, device=gamma.device))
    d = torch.where(live, d, torch.zeros((), dtype=d.dtype, device=d.device))
    kappa = torch.where(live, kappa, torch.zeros((), dtype=kappa.dtype, device=kappa.device))
    replayed = torch.einsum("rhlv,rhlk->rhvk", d, weights * kappa)
    return S0 * torch.exp(total) + replayed  # total [R, HV, 1, K] broadcasts over V


def _reconstruct_predecayed(S0, d, kappa, prefix, c, live):
    """``(S0 + sum_{i<c} d_i kappa~_i^T) diag(exp(P_{c-1}))``, ``P_{-1} = 0``: no per-entry weights."""
    zero = torch.zeros((), dtype=d.dtype, device=d.device)
    d, kappa = torch.where(live, d, zero), torch.where(live, kappa, zero)
    last = (c - 1).clamp(min=0)[:, None, None, None].expand(-1, prefix.shape[1], 1, prefix.shape[3])
    total = torch.where(c[:, None, None, None] > 0, prefix.gather(2, last), zero)  # P_{c-1}, [R, HV, 1, K]
    return (S0 + torch.einsum("rhlv,rhlk->rhvk", d, kappa)) * torch.exp(total)


def _gate_ring4(g_cache: torch.Tensor) -> torch.Tensor:
    """The gate ring as ``[slots, HV, L, G]``: GDN's ``[slots, HV, L]`` as a view with G = 1."""
    return g_cache.unsqueeze(-1) if g_cache.ndim == 3 else g_cache


def _gather_rings(initial_state, d_cache, k_cache, g_cache, slots, hpq, cd):
    """Checkpoint and rings of the given slots, upcast, with k expanded from its heads to HV heads
    (``hpq`` value heads per key head: 1 where keys are per value head)."""
    return (
        initial_state[slots].to(cd),
        d_cache[slots].to(cd),
        k_cache[slots].to(cd).repeat_interleave(hpq, dim=1),
        g_cache[slots].to(cd),
    )


def replay_token(S_rec: torch.Tensor, tok: Token, rows: torch.Tensor):
    """The current token on rebuilt states: returns ``(o, u)``; the state itself is not formed.

    sq = S_rec (alpha * q),  sk = S_rec (alpha * k),  u = beta (v - sk),  o = sq + u (k . q).
    """
    alpha, q, k = torch.exp(tok.g[rows]), tok.q[rows], tok.k[rows]
    sq = torch.einsum("rhvk,rhk->rhv", S_rec, alpha * q)
    sk = torch.einsum("rhvk,rhk->rhv", S_rec, alpha * k)
    u = tok.beta[rows, :, None] * (tok.v[rows] - sk)
    o = sq + u * (k * q).sum(-1, keepdim=True)
    return o, u


def replayssm_decode_step(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    d_cache: torch.Tensor,
    k_cache: torch.Tensor,
    g_cache: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    write_pos: torch.Tensor,
    force_flush: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    ring_format: str = "raw",
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One ReplaySSM decode step (KDA; :func:`gdn_replayssm_decode_step` for Gated DeltaNet). Mutates
    ``out``, the rings and, on flush rows, the checkpoint.

    Per non-padding row with slot ``s`` and cursor ``c = write_pos[row]``:
      * rebuild ``S_rec`` from ``initial_state[s]`` and ring entries ``i < c``; write ``out``;
      * flush when ``c == L - 1`` (natural) or ``force_flush[row] != 0`` (forced):
        ``initial_state[s] <- S_rec diag(alpha) + u k^T`` (the post-token state); nothing appended;
      * otherwise append at ``c``: ``d_cache[s, :, c] = u``, ``g_cache[s, :, c] = g``,
        ``k_cache[s, :, c] = k`` (per q/k head); the checkpoint is untouched.
    In the ``predecayed`` format the append is ``g_cache[s, :, c] = P_c = P_{c-1} + g`` and
    ``k_cache[s, :, c] = k exp(-P_c)`` per value head (``ring_format``: ``replayssm_ref.formats``).
    Padding rows (negative index) get ``out = 0`` and touch nothing. ``write_pos`` is never written:
    the caller advances it, see :func:`advance_write_pos`. Returns ``(out, initial_state)``.
    """
    return _replay_step(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache, out,
        ssm_state_indices, write_pos, force_flush, use_qk_l2norm_in_kernel, lower_bound,
        gate="kda", ring_format=ring_format, check_values=check_values,
    )  # fmt: skip


def gdn_replayssm_decode_step(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    d_cache: torch.Tensor,
    k_cache: torch.Tensor,
    g_cache: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    write_pos: torch.Tensor,
    force_flush: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    *,
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One ReplaySSM decode step of Gated DeltaNet: :func:`replayssm_decode_step` with one log decay
    per value head (``a [B, HV]``, ``dt_bias [HV]``, ``g_cache [slots, HV, L]`` float32, the softplus
    gate ``g = -exp(A_log) softplus(a + dt_bias)``), the raw ring format."""
    return _replay_step(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache, out,
        ssm_state_indices, write_pos, force_flush, use_qk_l2norm_in_kernel, None,
        gate="gdn", ring_format="raw", check_values=check_values,
    )  # fmt: skip


def _replay_step(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache, out, ssm_state_indices,
    write_pos, force_flush, use_qk_l2norm_in_kernel, lower_bound, *, gate, ring_format, check_values,
):  # fmt: skip
    shapes = validate_replayssm_inputs(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, d_cache, k_cache, g_cache,
        out, ssm_state_indices, write_pos, force_flush, ring_format=ring_format, lower_bound=lower_bound,
        gate=gate, check_values=check_values,
    )  # fmt: skip
    fmt = _ring_format(ring_format)
    g_cache = _gate_ring4(g_cache)
    L = shapes.cache_length

    cd = compute_dtype(mixed_qkv, initial_state)
    tok = prepare_token(mixed_qkv, b, A_log, scale, shapes, cd, use_qk_l2norm_in_kernel, lower_bound)
    rows, slots = valid_rows(ssm_state_indices)
    c = write_pos[rows].long()

    # 1. Rebuild each row's pre-token state and run the current token on it.
    hpk = 1 if fmt.keys_per_value_head else shapes.heads_per_q
    S0, d, kappa, gamma = _gather_rings(initial_state, d_cache, k_cache, g_cache, slots, hpk, cd)
    S_rec = reconstruct_state(S0, d, kappa, gamma, c, prefix_gate=fmt.prefix_gate)
    o, u = replay_token(S_rec, tok, rows)
    out.zero_()
    out[rows, 0] = o.to(out.dtype)

    # 2. Flush rows fold the token into the checkpoint; the others append it to the ring.
    forced = force_flush[rows] != 0 if force_flush is not None else torch.zeros_like(c, dtype=torch.bool)
    flush = (c == L - 1) | forced
    f, n = flush.nonzero().squeeze(1), (~flush).nonzero().squeeze(1)

    alpha, k = torch.exp(tok.g[rows[f]]), tok.k[rows[f]]
    S_post = S_rec[f] * alpha[:, :, None, :] + u[f][..., :, None] * k[..., None, :]
    initial_state[slots[f]] = S_post.to(initial_state.dtype)

    s, cn = slots[n], c[n]
    d_cache[s, :, cn] = u[n].to(d_cache.dtype)
    if fmt.prefix_gate:  # P_c = P_{c-1} + g (P_{-1} = 0), and the key decayed back to the checkpoint
        prev = gamma[n, :, (cn - 1).clamp(min=0)]  # [rows, HV, K]; read before anything is written
        P = torch.where((cn > 0)[:, None, None], prev, torch.zeros_like(prev)) + tok.g[rows[n]]
        g_cache[s, :, cn] = P.to(g_cache.dtype)
        k_cache[s, :, cn] = (tok.k[rows[n]] * torch.exp(-P)).to(k_cache.dtype)
    else:
        g_cache[s, :, cn] = tok.g[rows[n]].to(g_cache.dtype)
        k_cache[s, :, cn] = tok.k_qk[rows[n]].to(k_cache.dtype)
    return out, initial_state


def materialize_state(
    initial_state: torch.Tensor,
    d_cache: torch.Tensor,
    k_cache: torch.Tensor,
    g_cache: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    write_pos: torch.Tensor,
    *,
    ring_format: str = "raw",
) -> torch.Tensor:
    """The true pre-token state ``[B, HV, V, K]`` of each row (checkpoint advanced by its ring).

    For debugging and notebooks: float64 when the state is float64, float32 otherwise; padding rows
    are zero. Either gate: a 3-D ``g_cache [slots, HV, L]`` is Gated DeltaNet's. Reads only; nothing
    is written.
    """
    g_cache = _gate_ring4(g_cache)
    cd = compute_dtype(initial_state)
    B = ssm_state_indices.shape[0]
    _, HV, V, K = initial_state.shape
    hpk = HV // k_cache.shape[1]  # 1 where keys are per value head
    rows, slots = valid_rows(ssm_state_indices)
    S0, d, kappa, gamma = _gather_rings(initial_state, d_cache, k_cache, g_cache, slots, hpk, cd)
    full = torch.zeros(B, HV, V, K, dtype=cd, device=initial_state.device)
    prefix = _ring_format(ring_format).prefix_gate
    full[rows] = reconstruct_state(S0, d, kappa, gamma, write_pos[rows].long(), prefix_gate=prefix)
    return full


def advance_write_pos(
    write_pos: torch.Tensor,
    cache_length: int,
    force_flush: torch.Tensor | None = None,
    ssm_state_indices: torch.Tensor | None = None,
) -> torch.Tensor:
    """The caller's side of the contract, after each step: in place, no host sync.

    ``c -> c + 1`` after a non-flush step, ``c -> 0`` after a natural (``c == L - 1``) or forced flush;
    padding rows (negative index) keep their cursor. Returns ``write_pos``.
    """
    flush = write_pos == cache_length - 1
    if force_flush is not None:
        flush |= force_flush != 0
    new = torch.where(flush, torch.zeros_like(write_pos), write_pos + 1)
    if ssm_state_indices is not None:
        new = torch.where(ssm_state_indices >= 0, new, write_pos)
    return write_pos.copy_(new)
