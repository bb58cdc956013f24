"""The one place that checks decode inputs, shared by the reference and the Helion kernels.

Layouts (``B`` rows, ``H`` q/k heads, ``HV`` value heads, ``K`` key dim, ``V`` value dim, ``L`` ring length):

    mixed_qkv          [B, 2*H*K + HV*V]     q | k | v packed along the last dim (stride 1)
    a                  [B, HV*K] or [B, HV, K]  raw gate logits, contiguous (GDN: [B, HV])
    b                  [B, HV]               raw beta logits
    A_log              [HV]
    dt_bias            [HV*K] or [HV, K]     contiguous (GDN: [HV])
    initial_state      [slots, HV, V, K]     V-major state / checkpoint, last stride 1
    d_cache            [slots, HV, L, V]     ring of deltas u
    k_cache            [slots, H,  L, K]     ring of (normalised) keys, one per q/k head
                                             (``predecayed`` format: [slots, HV, L, K])
    g_cache            [slots, HV, L, K]     ring of per-channel log decays, float32
                                             (``predecayed``: prefix sums;
                                             GDN: [slots, HV, L], one per value head)
    out                [B, 1, HV, V]         contiguous
    ssm_state_indices  [B] integer           slot per row, negative = padding
    write_pos          [B] int32             per-row ring cursor
    force_flush        [B] int32 or None     nonzero forces a flush

Every failure is a ``ValueError`` naming the tensor, what was expected and what was given. Checks of
shapes, dtypes, strides and devices never read device memory. Checks that need tensor *values*
(cursor range, slot range, duplicate slots) live in :func:`check_runtime_values`; the decode steps run
it when ``check_values=True``, or by default (``None``) only when the inputs are on the CPU, where it
costs no host synchronisation. On the GPU it is opt-in so that a step stays capturable in a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .formats import ring_format as _ring_format
from .gates import check_gate_name, gate_channels

__all__ = [
    "DecodeShapes",
    "check_kernel_support",
    "check_runtime_values",
    "should_check_values",
    "validate_decode_inputs",
    "validate_replayssm_inputs",
]


@dataclass(frozen=True)
class DecodeShapes:
    """Sizes derived during validation, plus the 2-D views of ``a`` and 1-D view of ``dt_bias``."""

    batch: int
    num_q_heads: int
    num_v_heads: int
    key_dim: int
    value_dim: int
    a: torch.Tensor  # [B, HV*G], G = K (KDA) or 1 (GDN)
    dt_bias: torch.Tensor  # [HV*G]
    cache_length: int = 0  # 0 for the standard decode
    ring_format: str = "raw"
    gate: str = "kda"  # replayssm_ref.gates

    @property
    def gate_channels(self) -> int:
        return gate_channels(self.gate, self.key_dim)

    @property
    def heads_per_q(self) -> int:
        return self.num_v_heads // self.num_q_heads


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def _fail(name: str, expected: str, got: str, hint: str | None = None) -> None:
    msg = f"`{name}` must {expected}; got {got}"
    if hint:
        msg += f": {hint}"
    raise ValueError(msg)


def _is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def validate_decode_inputs(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    *,
    gate: str = "kda",
    check_values: bool | None = False,
) -> DecodeShapes:
    """Check the inputs shared by the standard decode and the ReplaySSM step; return the sizes.

    ``gate`` (``replayssm_ref.gates``) sizes ``a`` and ``dt_bias``: per key channel (KDA) or per value
    head (GDN). ``check_values`` adds :func:`check_runtime_values` (``None``: only on the CPU, see the
    module doc).
    """
    check_gate_name(gate)
    # Gate logits and bias may come per head ([B, HV, K], [HV, K]); they are flattened views below
    # (GDN's exact [B, HV] and [HV] are checked with the sizes).
    if a.ndim not in (2, 3) or not a.is_contiguous():
        want = "[B, HV]" if gate == "gdn" else "[B, HV*K] or [B, HV, K]"
        _fail("a", f"be a contiguous {want} tensor", f"shape {_shape(a)}, strides {a.stride()}")
    if dt_bias.ndim not in (1, 2) or not dt_bias.is_contiguous():
        want = "[HV]" if gate == "gdn" else "[HV*K] or [HV, K]"
        _fail("dt_bias", f"be a contiguous {want} tensor", f"shape {_shape(dt_bias)}, strides {dt_bias.stride()}")
    a2 = a.reshape(a.shape[0], -1) if a.ndim == 3 else a
    dt1 = dt_bias.reshape(-1)

    if mixed_qkv.ndim != 2:
        _fail("mixed_qkv", "have shape [B, 2*H*K + HV*V]", f"{mixed_qkv.ndim}-D shape {_shape(mixed_qkv)}")
    if mixed_qkv.stride(-1) != 1:
        _fail("mixed_qkv", "have last-dim stride 1 (rows may be strided)", f"stride {mixed_qkv.stride()}")
    if b.ndim != 2:
        _fail("b", "have shape [B, HV]", f"{b.ndim}-D shape {_shape(b)}")
    if b.stride(-1) != 1:
        _fail("b", "have last-dim stride 1", f"strides {b.stride()}")
    if A_log.ndim != 1 or A_log.stride(0) != 1:
        _fail("A_log", "be a 1-D [HV] tensor with stride 1", f"shape {_shape(A_log)}, strides {A_log.stride()}")
    if ssm_state_indices.ndim != 1:
        _fail("ssm_state_indices", "have shape [B]", f"shape {_shape(ssm_state_indices)}")
    if ssm_state_indices.dtype not in (torch.int32, torch.int64):
        _fail("ssm_state_indices", "have dtype torch.int32 or torch.int64", f"{ssm_state_indices.dtype}")
    if not out.is_contiguous():
        _fail("out", "be contiguous", f"shape {_shape(out)} with strides {out.stride()}")
    if not isinstance(scale, (int, float)) or isinstance(scale, bool):
        _fail("scale", "be a Python float", f"{type(scale).__name__}")

    device = mixed_qkv.device
    named = {"a": a, "b": b, "A_log": A_log, "dt_bias": dt_bias, "initial_state": initial_state}
    named |= {"out": out, "ssm_state_indices": ssm_state_indices}
    for name, t in named.items():
        if t.device != device:
            _fail(name, f"be on mixed_qkv's device {device}", f"{t.device}")

    batch = mixed_qkv.shape[0]
    for name, t in (("a", a2), ("b", b), ("ssm_state_indices", ssm_state_indices)):
        if t.shape[0] != batch:
            _fail(name, f"have batch size B = {batch} (from mixed_qkv) in dim 0", f"shape {_shape(t)}")

    if initial_state.ndim != 4:
        _fail("initial_state", "have shape [slots, HV, V, K]", f"{initial_state.ndim}-D shape {_shape(initial_state)}")
    if initial_state.stride(-1) != 1:
        _fail(
            "initial_state", "have last-dim stride 1 (slot views may be strided)", f"strides {initial_state.stride()}"
        )
    if not initial_state.dtype.is_floating_point:
        _fail(
            "initial_state", "have a floating dtype (float32, bfloat16, float16 or float64)", f"{initial_state.dtype}"
        )
    _, num_v_heads, value_dim, key_dim = initial_state.shape
    if not _is_pow2(key_dim) or not _is_pow2(value_dim):
        _fail(
            "initial_state",
            "have power-of-two V and K in [slots, HV, V, K]",
            f"shape {_shape(initial_state)} (V={value_dim}, K={key_dim})",
        )

    hv_k = num_v_heads * key_dim
    k_first = a2.shape[1] == dt1.numel() == num_v_heads * value_dim != hv_k  # both gate inputs sized by dim 2
    if gate == "gdn":
        _check_gdn_gate(a, a2, dt_bias, dt1, num_v_heads, key_dim)
    elif k_first:
        _fail(
            "initial_state",
            "be V-major [slots, HV, V, K] (S[v, k])",
            f"shape {_shape(initial_state)}, K-first [slots, HV, K, V] by a's {a2.shape[1]} = HV*{value_dim} gate "
            "logits per row",
            "FLA keeps states K-first; pass state.transpose(-1, -2).contiguous() (or FLA's state_v_first layout)",
        )
    if gate == "kda" and a2.shape[1] != hv_k:
        hint = None
        if a2.shape[1] == num_v_heads * value_dim:
            hint = "a was sized with value_dim, but the gate is per key channel"
        elif a2.shape[1] == num_v_heads:
            hint = "one logit per value head is Gated DeltaNet's gate: use the gdn_* functions"
        _fail("a", f"have HV*K = {num_v_heads}*{key_dim} = {hv_k} gate logits per row", f"shape {_shape(a)}", hint)
    if b.shape[1] != num_v_heads:
        _fail("b", f"have shape [B, HV] = [{batch}, {num_v_heads}]", f"shape {_shape(b)}")
    if A_log.numel() != num_v_heads:
        _fail("A_log", f"have HV = {num_v_heads} elements", f"shape {_shape(A_log)}")
    if gate == "kda" and dt1.numel() != hv_k:
        hint = "sized with value_dim? the gate is per key channel" if dt1.numel() == num_v_heads * value_dim else None
        if dt1.numel() == num_v_heads:
            hint = "one bias per value head is Gated DeltaNet's gate: use the gdn_* functions"
        _fail("dt_bias", f"have HV*K = {hv_k} elements", f"shape {_shape(dt_bias)}", hint)
    if tuple(out.shape) != (batch, 1, num_v_heads, value_dim):
        _fail("out", f"have shape [B, 1, HV, V] = [{batch}, 1, {num_v_heads}, {value_dim}]", f"{_shape(out)}")

    qk_width = mixed_qkv.shape[1] - num_v_heads * value_dim
    if qk_width <= 0 or qk_width % 2 or (qk_width // 2) % key_dim:
        _fail(
            "mixed_qkv",
            f"have width 2*H*K + HV*V with K = {key_dim}, HV*V = {num_v_heads * value_dim}",
            f"width {mixed_qkv.shape[1]}",
            "q and k take equal widths that must be a multiple of K",
        )
    num_q_heads = qk_width // 2 // key_dim
    if num_v_heads % num_q_heads:
        _fail(
            "mixed_qkv",
            f"pack H q/k heads with HV = {num_v_heads} a multiple of H",
            f"H = {num_q_heads}",
        )
    if should_check_values(check_values, device):
        check_runtime_values(ssm_state_indices, {"initial_state": initial_state})
    return DecodeShapes(batch, num_q_heads, num_v_heads, key_dim, value_dim, a2, dt1, gate=gate)


def _check_gdn_gate(a, a2, dt_bias, dt1, num_v_heads, key_dim) -> None:
    """GDN's gate inputs: one logit and one bias per value head (KDA's per-channel sizes say so)."""
    kda = "per key channel (HV*K) is Kimi Delta Attention's gate: use the kda functions"
    if a.ndim != 2 or a2.shape[1] != num_v_heads:
        hint = kda if a2.shape[1] == num_v_heads * key_dim else None
        _fail("a", f"have shape [B, HV] = [{a.shape[0]}, {num_v_heads}] (GDN: one logit per value head)",
              f"shape {_shape(a)}", hint)  # fmt: skip
    if dt_bias.ndim != 1 or dt1.numel() != num_v_heads:
        hint = kda if dt1.numel() == num_v_heads * key_dim else None
        _fail("dt_bias", f"have shape [HV] = [{num_v_heads}] (GDN: one bias per value head)",
              f"shape {_shape(dt_bias)}", hint)  # fmt: skip


def validate_replayssm_inputs(
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
    force_flush: torch.Tensor | None,
    *,
    ring_format: str = "raw",
    lower_bound: float | None = None,
    gate: str = "kda",
    check_values: bool | None = False,
) -> DecodeShapes:
    """Check a ReplaySSM step's inputs: the standard ones, then cursors and the three rings in
    ``ring_format`` (``replayssm_ref.formats``; its gate condition with ``lower_bound``) for ``gate``
    (``replayssm_ref.gates``: GDN's gate ring is ``[slots, HV, L]``, raw format only), and
    ``check_values`` as in :func:`validate_decode_inputs`, with the rings and cursors included."""
    fmt = _ring_format(ring_format)
    if gate == "gdn" and fmt.name != "raw":
        raise ValueError(
            f"`ring_format` must be 'raw' for Gated DeltaNet (one float32 log decay per value head and entry); "
            f"got {fmt.name!r}"
        )
    s = validate_decode_inputs(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, gate=gate
    )  # fmt: skip
    batch, hv, h, k, v = s.batch, s.num_v_heads, s.num_q_heads, s.key_dim, s.value_dim

    for name, t in (("write_pos", write_pos), ("force_flush", force_flush)):
        if t is None:
            continue
        if t.ndim != 1 or t.dtype is not torch.int32:
            _fail(name, "be a 1-D int32 tensor of shape [B]", f"{t.dtype} of shape {_shape(t)}")
        if tuple(t.shape) != (batch,):
            _fail(name, f"have shape [B] = [{batch}]", f"{_shape(t)}")

    for name, t in (("d_cache", d_cache), ("k_cache", k_cache), ("g_cache", g_cache)):
        if gate == "gdn" and name == "g_cache":
            continue
        if name == "g_cache" and t.ndim == 3:
            _fail("g_cache", "be a 4-D ring [slots, HV, L, K] (KDA: one log decay per key channel)",
                  f"3-D shape {_shape(t)}", "[slots, HV, L] is Gated DeltaNet's per-head gate ring")  # fmt: skip
        if t.ndim != 4:
            _fail(name, "be a 4-D ring [slots, heads, L, dim]", f"{t.ndim}-D shape {_shape(t)}")
        if not t.dtype.is_floating_point:
            _fail(name, "have a floating dtype", f"{t.dtype}")
    cache_length = d_cache.shape[2]
    if cache_length < 1:
        _fail("d_cache", "have a ring length L = d_cache.shape[2] of at least 1", f"shape {_shape(d_cache)}")
    if gate == "gdn":
        _check_gdn_gate_ring(g_cache, hv, cache_length, k)

    def check_ring(name, t, heads, head_name, dim, dim_name, other_dim, other_name):
        want = (heads, cache_length, dim)
        if tuple(t.shape[1:]) == want:
            return
        got = tuple(t.shape[1:])
        hint = None
        if got[2] == other_dim and other_dim != dim:
            hint = f"last dim equals {other_name}, but {name} holds {dim_name}-sized entries"
        elif got[0] != heads:
            hint = f"dim 1 should count {head_name} heads ({heads})"
        elif got[1] != cache_length:
            hint = "every ring must have d_cache's length L"
        _fail(
            name,
            f"have shape [slots, {head_name}, L, {dim_name}] = [*, {heads}, {cache_length}, {dim}]",
            _shape(t),
            hint,
        )

    check_ring("d_cache", d_cache, hv, "HV", v, "V", k, "key_dim (K)")
    if fmt.keys_per_value_head and h != hv and tuple(k_cache.shape[1:]) == (h, cache_length, k):
        _fail(
            "k_cache",
            f"have shape [slots, HV, L, K] = [*, {hv}, {cache_length}, {k}] in ring_format={fmt.name!r}",
            _shape(k_cache),
            "one key per q/k head is the raw format's layout; predecayed keys are per value head",
        )
    if fmt.keys_per_value_head:
        check_ring("k_cache", k_cache, hv, "HV", k, "K", v, "value_dim (V)")
    else:
        if h != hv and tuple(k_cache.shape[1:]) == (hv, cache_length, k):
            _fail(
                "k_cache",
                f"have shape [slots, H, L, K] = [*, {h}, {cache_length}, {k}] in ring_format={fmt.name!r}",
                _shape(k_cache),
                "keys per value head (HV) are the predecayed format's layout; this format shares a key per q/k head",
            )
        check_ring("k_cache", k_cache, h, "H", k, "K", v, "value_dim (V)")
    if gate == "kda" and g_cache.shape[1] == h and h != hv and tuple(g_cache.shape[2:]) == (cache_length, k):
        _fail(
            "g_cache",
            f"have shape [slots, HV, L, K] = [*, {hv}, {cache_length}, {k}]",
            _shape(g_cache),
            "grouped by q/k heads (H), but the gate is per value head (HV)",
        )
    want_g = (hv, cache_length, k)
    if gate == "kda" and tuple(g_cache.shape[1:]) != want_g:
        hint = None
        if g_cache.shape[3] == v and v != k:
            hint = "last dim equals value_dim, but the gate shares key_dim"
        elif g_cache.shape[2] != cache_length:
            hint = "every ring must have d_cache's length L"
        _fail("g_cache", f"have shape [slots, HV, L, K] = [*, {hv}, {cache_length}, {k}]", _shape(g_cache), hint)
    allowed_g = fmt.gate_dtypes(initial_state.dtype)
    if g_cache.dtype not in allowed_g:
        _fail(
            "g_cache",
            " or ".join(str(d) for d in allowed_g).join(("have dtype ", f" in ring_format={fmt.name!r}")),
            f"{g_cache.dtype}",
            "log decays summed over the ring lose too much in 16 bits",
        )
    fmt.check_gate(lower_bound, cache_length)

    device = mixed_qkv.device
    named = {"d_cache": d_cache, "k_cache": k_cache, "g_cache": g_cache, "write_pos": write_pos}
    if force_flush is not None:
        named["force_flush"] = force_flush
    for name, t in named.items():
        if t.device != device:
            _fail(name, f"be on mixed_qkv's device {device}", f"{t.device}")
    if should_check_values(check_values, device):
        rings = {"initial_state": initial_state, "d_cache": d_cache, "k_cache": k_cache, "g_cache": g_cache}
        check_runtime_values(ssm_state_indices, rings, write_pos=write_pos, cache_length=cache_length)
    return DecodeShapes(batch, h, hv, k, v, s.a, s.dt_bias, cache_length, fmt.name, gate)


def _check_gdn_gate_ring(g_cache: torch.Tensor, hv: int, cache_length: int, k: int) -> None:
    """GDN's gate ring: ``[slots, HV, L]``, one log decay per value head and entry."""
    want = f"have shape [slots, HV, L] = [*, {hv}, {cache_length}] (GDN: one log decay per value head and entry)"
    if g_cache.ndim == 4 and tuple(g_cache.shape[1:]) == (hv, cache_length, k):
        _fail("g_cache", want, _shape(g_cache), "[slots, HV, L, K] is Kimi Delta Attention's per-channel gate ring")
    if g_cache.ndim != 3 or tuple(g_cache.shape[1:]) != (hv, cache_length):
        hint = "every ring must have d_cache's length L" if g_cache.ndim == 3 and g_cache.shape[1] == hv else None
        _fail("g_cache", want, _shape(g_cache), hint)
    if not g_cache.dtype.is_floating_point:
        _fail("g_cache", "have a floating dtype", f"{g_cache.dtype}")


def should_check_values(check_values: bool | None, device: torch.device) -> bool:
    """``None`` means: check when it is free (CPU), skip on accelerators (it would sync the host)."""
    return device.type == "cpu" if check_values is None else bool(check_values)


def check_runtime_values(
    ssm_state_indices: torch.Tensor,
    state_tensors: dict[str, torch.Tensor],
    *,
    write_pos: torch.Tensor | None = None,
    cache_length: int | None = None,
) -> None:
    """Check the preconditions that depend on tensor values. Reads device memory: syncs the host.

    * every non-negative slot index is below the slot count of every tensor in ``state_tensors``;
    * no non-negative slot appears twice in one batch (rows would race on the same state);
    * ``0 <= write_pos < L`` on non-padding rows.
    """
    idx = ssm_state_indices.detach().to("cpu", torch.int64)
    valid = idx >= 0
    used = idx[valid]
    for name, t in state_tensors.items():
        slots = t.shape[0]
        if used.numel() and int(used.max()) >= slots:
            bad = int(used.max())
            _fail(
                "ssm_state_indices",
                f"index slots of `{name}` (0 <= index < {slots}) on non-padding rows",
                f"index {bad}",
                f"`{name}` has shape {_shape(t)}",
            )
    uniq, counts = torch.unique(used, return_counts=True)
    if (counts > 1).any():
        dup = uniq[counts > 1].tolist()
        _fail(
            "ssm_state_indices",
            "not repeat a non-negative slot within one batch",
            f"slot(s) {dup} used by several rows",
            "two rows would update the same state in place",
        )
    if write_pos is not None:
        wp = write_pos.detach().to("cpu", torch.int64)[valid]
        bad = (wp < 0) | (wp >= cache_length)
        if bad.any():
            rows = valid.nonzero().squeeze(1)[bad].tolist()
            _fail(
                "write_pos",
                f"lie in [0, L-1] = [0, {cache_length - 1}] on non-padding rows",
                f"{wp[bad].tolist()} on rows {rows}",
                "advance it with advance_write_pos(); reset it to 0 after a flush or a new checkpoint",
            )


_KERNEL_STATE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def check_kernel_support(shapes: DecodeShapes, initial_state: torch.Tensor, out: torch.Tensor) -> None:
    """What the Helion kernels support beyond the shared validation (the reference takes any float)."""
    if initial_state.dtype not in _KERNEL_STATE_DTYPES:
        _fail(
            "initial_state",
            "have dtype float32, bfloat16 or float16 for the Helion kernels",
            f"{initial_state.dtype}",
            "use replayssm_ref for float64",
        )
    if out.dtype not in _KERNEL_STATE_DTYPES:
        _fail("out", "have dtype float32, bfloat16 or float16 for the Helion kernels", f"{out.dtype}")
    for name, n in (("K", shapes.key_dim), ("V", shapes.value_dim)):
        if not 16 <= n <= 256:
            _fail("initial_state", f"have {name} in [16, 256] for the Helion kernels", f"{name} = {n}")


# ---- speculative decoding (replayssm_ref.spec) --------------------------------------------------------


@dataclass(frozen=True)
class SpecShapes:
    """A verify's sizes: the decode step's, per draft, and the number of drafts ``T``."""

    step: DecodeShapes  # of one draft (batch B)
    num_drafts: int


def _flat_drafts(name: str, t: torch.Tensor, batch: int, num_drafts: int, ndim: int) -> torch.Tensor:
    """``t [B, T, ...]`` checked for its leading dims, as ``[B*T, ...]`` (a view where it can be)."""
    if t.ndim != ndim or tuple(t.shape[:2]) != (batch, num_drafts):
        _fail(name, f"have shape [B, T, ...] = [{batch}, {num_drafts}, ...] ({ndim}-D, T drafts per row)",
              f"{t.ndim}-D shape {_shape(t)}")  # fmt: skip
    return t.reshape(batch * num_drafts, *t.shape[2:])


def validate_spec_verify_inputs(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, parents, *,
    rings=None, write_pos=None, snapshots=None, lower_bound=None, check_values=False,
) -> SpecShapes:  # fmt: skip
    """Check a verify's inputs (``replayssm_ref.spec``): the drafts ``[B, T, ...]``, ``parents``, and
    either the rings and cursors (ReplaySSM) or ``snapshots`` (the snapshot verify); each draft's
    tensors as a decode step's. With ``check_values``: every parent earlier than its child, and
    ``write_pos + T <= L`` (the capacity rule)."""
    if mixed_qkv.ndim != 3:
        _fail("mixed_qkv", "have shape [B, T, 2*H*K + HV*V] (T draft tokens per row)",
              f"{mixed_qkv.ndim}-D shape {_shape(mixed_qkv)}")  # fmt: skip
    batch, num_drafts = mixed_qkv.shape[:2]
    if num_drafts < 1:
        _fail("mixed_qkv", "hold at least one draft (T >= 1)", f"shape {_shape(mixed_qkv)}")
    a_ndim = a.ndim if a.ndim in (3, 4) else 3
    flat = {
        "mixed_qkv": mixed_qkv.reshape(batch * num_drafts, -1) if mixed_qkv.stride(-1) == 1 else mixed_qkv[0],
        "a": _flat_drafts("a", a, batch, num_drafts, a_ndim).contiguous(),
        "b": _flat_drafts("b", b, batch, num_drafts, 3),
        "out": _flat_drafts("out", out, batch, num_drafts, 4).unsqueeze(1),
    }
    if not out.is_contiguous():
        _fail("out", "be contiguous", f"shape {_shape(out)} with strides {out.stride()}")
    if ssm_state_indices.ndim != 1 or ssm_state_indices.shape[0] != batch:
        _fail("ssm_state_indices", f"have shape [B] = [{batch}] (from mixed_qkv)", f"shape {_shape(ssm_state_indices)}")
    step = validate_decode_inputs(
        flat["mixed_qkv"], flat["a"], flat["b"], A_log, dt_bias, scale, initial_state, flat["out"],
        ssm_state_indices.repeat_interleave(num_drafts),
    )  # fmt: skip
    step = DecodeShapes(batch, step.num_q_heads, step.num_v_heads, step.key_dim, step.value_dim,
                        a.reshape(batch, num_drafts, -1), step.dt_bias)  # fmt: skip
    if parents is not None:
        if parents.dtype is not torch.int32 or tuple(parents.shape) != (batch, num_drafts):
            _fail("parents", f"be an int32 tensor of shape [B, T] = [{batch}, {num_drafts}] (None: a chain)",
                  f"{parents.dtype} of shape {_shape(parents)}")  # fmt: skip
        if parents.device != mixed_qkv.device:
            _fail("parents", f"be on mixed_qkv's device {mixed_qkv.device}", f"{parents.device}")
    hv, v, k = step.num_v_heads, step.value_dim, step.key_dim
    if snapshots is not None:
        want = (batch, num_drafts, hv, v, k)
        if tuple(snapshots.shape) != want or snapshots.dtype != initial_state.dtype:
            _fail("snapshots", f"have shape [B, T, HV, V, K] = {list(want)} and initial_state's dtype "
                  f"{initial_state.dtype}", f"{snapshots.dtype} of shape {_shape(snapshots)}")  # fmt: skip
    cache_length = 0
    if rings is not None:
        d_cache, k_cache, g_cache = rings
        if write_pos is None or write_pos.dtype is not torch.int32 or tuple(write_pos.shape) != (batch,):
            got = "None" if write_pos is None else f"{write_pos.dtype} of shape {_shape(write_pos)}"
            _fail("write_pos", f"be an int32 tensor of shape [B] = [{batch}]", got)
        one = validate_replayssm_inputs(
            flat["mixed_qkv"][:batch], flat["a"][:batch], flat["b"][:batch], A_log, dt_bias, scale, initial_state,
            d_cache, k_cache, g_cache, flat["out"][:batch], ssm_state_indices, write_pos, None,
            lower_bound=lower_bound,
        )  # fmt: skip
        cache_length = one.cache_length
        if num_drafts > cache_length:
            _fail(
                "mixed_qkv",
                f"hold at most L = {cache_length} drafts per row (the ring holds every draft's entry past the "
                "committed ones)",
                f"T = {num_drafts} (shape {_shape(mixed_qkv)})",
                f"d_cache {_shape(d_cache)} has L = {cache_length}; allocate a longer ring or draft fewer tokens",
            )
    if should_check_values(check_values, mixed_qkv.device):
        pools = {"initial_state": initial_state} | (
            {} if rings is None else dict(zip(("d_cache", "k_cache", "g_cache"), rings, strict=True))
        )
        check_runtime_values(ssm_state_indices, pools, write_pos=write_pos, cache_length=cache_length or None)
        if parents is not None:
            _check_parents(parents)
        if rings is not None:
            _check_capacity(ssm_state_indices, write_pos, num_drafts, cache_length)
    return SpecShapes(DecodeShapes(batch, step.num_q_heads, hv, k, v, step.a, step.dt_bias, cache_length), num_drafts)


def _check_parents(parents: torch.Tensor) -> None:
    p = parents.detach().cpu()
    t = torch.arange(p.shape[1])[None, :]
    bad = (p >= t) | (p < -1)
    if bad.any():
        row, node = (int(x) for x in bad.nonzero()[0])
        _fail(
            "parents", "name for every draft t a parent earlier than t (or -1: the committed state)",
            f"parents[{row}, {node}] = {int(p[row, node])}", "a tree's nodes come in an order where parents go first",
        )  # fmt: skip


def _check_capacity(ssm_state_indices, write_pos, num_drafts: int, cache_length: int) -> None:
    valid = ssm_state_indices.detach().cpu() >= 0
    wp = write_pos.detach().cpu().long()
    bad = valid & (wp + num_drafts > cache_length)
    if bad.any():
        rows = bad.nonzero().squeeze(1).tolist()
        _fail("write_pos", f"leave room for T = {num_drafts} drafts: write_pos + T <= L = {cache_length}",
              f"{wp[bad].tolist()} on rows {rows}",
              "commit with the same T folds when the next window would not fit (replayssm_spec_commit)")  # fmt: skip


def validate_spec_commit_inputs(
    initial_state, rings, ssm_state_indices, write_pos, num_accepted, accepted_nodes, force_flush, num_drafts, *,
    check_values=False,
) -> int:  # fmt: skip
    """Check a commit's inputs; return the ring length L. With ``check_values``: accept counts in
    ``[0, T]``, each accepted path a root followed by children of the draft before (needs the verify's
    ``parents``: checked by ``check_accepted_path``), cursors with room for the window."""
    d_cache, k_cache, g_cache = rings
    if not isinstance(num_drafts, int) or isinstance(num_drafts, bool) or num_drafts < 1:
        _fail("num_drafts", "be a positive int (the T of the verify rounds)", f"{num_drafts!r}")
    batch = ssm_state_indices.shape[0] if ssm_state_indices.ndim == 1 else -1
    if initial_state.ndim != 4 or d_cache.ndim != 4 or k_cache.ndim != 4 or g_cache.ndim != 4:
        _fail("initial_state", "be [slots, HV, V, K] with 4-D rings [slots, heads, L, dim]",
              f"{_shape(initial_state)}, rings {_shape(d_cache)}, {_shape(k_cache)}, {_shape(g_cache)}")  # fmt: skip
    cache_length = d_cache.shape[2]
    if num_drafts > cache_length:
        _fail("num_drafts", f"be at most L = {cache_length}", f"{num_drafts}")
    for name, t in (("write_pos", write_pos), ("num_accepted", num_accepted), ("force_flush", force_flush)):
        if t is None:
            continue
        if t.dtype is not torch.int32 or tuple(t.shape) != (batch,):
            _fail(name, f"be an int32 tensor of shape [B] = [{batch}] (from ssm_state_indices)",
                  f"{t.dtype} of shape {_shape(t)}")  # fmt: skip
    if accepted_nodes is not None and (
        accepted_nodes.dtype is not torch.int32 or tuple(accepted_nodes.shape) != (batch, num_drafts)
    ):
        _fail("accepted_nodes", f"be an int32 tensor of shape [B, T] = [{batch}, {num_drafts}] (None: a chain)",
              f"{accepted_nodes.dtype} of shape {_shape(accepted_nodes)}")  # fmt: skip
    if should_check_values(check_values, initial_state.device):
        pools = {"initial_state": initial_state, "d_cache": d_cache, "k_cache": k_cache, "g_cache": g_cache}
        check_runtime_values(ssm_state_indices, pools, write_pos=write_pos, cache_length=cache_length)
        valid = ssm_state_indices.detach().cpu() >= 0
        n = num_accepted.detach().cpu()
        bad = valid & ((n < 0) | (n > num_drafts))
        if bad.any():
            _fail("num_accepted", f"lie in [0, T] = [0, {num_drafts}] on non-padding rows",
                  f"{n[bad].tolist()} on rows {bad.nonzero().squeeze(1).tolist()}")  # fmt: skip
        _check_capacity(ssm_state_indices, write_pos, num_drafts, cache_length)
        if accepted_nodes is not None:
            nodes = accepted_nodes.detach().cpu()
            for row in valid.nonzero().squeeze(1).tolist():
                path = nodes[row, : int(n[row])]
                if ((path < 0) | (path >= num_drafts)).any() or (path[1:] <= path[:-1]).any():
                    _fail("accepted_nodes", f"list row {row}'s accepted drafts root side first, increasing, in "
                          f"[0, T)", f"{path.tolist()}")  # fmt: skip
    return cache_length


def check_accepted_path(accepted_nodes: torch.Tensor, num_accepted: torch.Tensor, parents: torch.Tensor) -> None:
    """A ``ValueError`` unless each row's first ``num_accepted`` nodes form a path of ``parents``: a
    root (parent -1), then each node a child of the one before. Reads device memory."""
    nodes, n, par = accepted_nodes.cpu(), num_accepted.cpu(), parents.cpu()
    for row in range(nodes.shape[0]):
        prev = -1
        for j in range(int(n[row])):
            node = int(nodes[row, j])
            if int(par[row, node]) != prev:
                got = f"row {row}: node {node} after {prev}, but parents[{row}, {node}] = {int(par[row, node])}"
                _fail("accepted_nodes", "follow parents from a root, each node a child of the one before", got)
            prev = node
