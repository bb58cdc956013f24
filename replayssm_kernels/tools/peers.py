"""sglang's ReplaySSM decode kernels as benchmark peers, loaded by file path (sglang is never installed).

``../shared/tools/device-wheels.sh`` keeps the kernel files of the public sglang 0.5.23 wheel in
``.whl/peers/``:

* ``helion/kda_replayssm.py``: the Helion KDA kernel our signature follows. It imports two sglang names,
  ``KDA_SMALL_VALUE_HEAD_THRESHOLD`` (from ``helion/__init__.py``) and ``validate_packed_decode_inputs``
  (from ``helion/kda_decode.py``); both files are loaded from the same folder and stand in for them.
* ``linear/fused_recurrent_linear_replayssm.py``: the gate-generic Triton decode (``is_kda=True``), an
  older revision without pre-decayed keys or the bounded gate (softplus only).
* ``linear/kda_replayssm_spec_decode.py``: the Triton KDA speculative commit (``commit_kda_replayssm_spec``:
  folds each round's accepted drafts into the checkpoint; chains only).

A peer whose files are absent is ``None``: the benchmark skips it.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path

DEFAULT_DIR = Path(".whl/peers")
STAND_IN = "sglang.kernels.ops.attention.helion"  # the package the Helion peer imports from


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _stand_in_packages(folder: Path) -> None:
    """``sglang.kernels.ops.attention.helion`` (from ``helion/__init__.py``) and its ``kda_decode``."""
    parts = STAND_IN.split(".")
    for i in range(1, len(parts)):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    package = _load(STAND_IN, folder / "__init__.py")
    package.__path__ = [str(folder)]
    _load(STAND_IN + ".kda_decode", folder / "kda_decode.py")


def sglang_helion(peers: Path = DEFAULT_DIR) -> Callable | None:
    """``helion_fused_recurrent_kda_replayssm_decode`` of sglang (our signature), or None."""
    folder = peers / "helion"
    if not all((folder / f).exists() for f in ("__init__.py", "kda_decode.py", "kda_replayssm.py")):
        return None
    _stand_in_packages(folder)
    return _load(STAND_IN + ".kda_replayssm", folder / "kda_replayssm.py").helion_fused_recurrent_kda_replayssm_decode


def sglang_triton(peers: Path = DEFAULT_DIR) -> Callable | None:
    """``fused_recurrent_linear_replayssm_decode`` of sglang (``is_kda`` selects KDA), or None."""
    path = peers / "linear" / "fused_recurrent_linear_replayssm.py"
    if not path.exists():
        return None
    return _load("sglang_peer_triton_replayssm", path).fused_recurrent_linear_replayssm_decode


def sglang_kda_spec_commit(peers: Path = DEFAULT_DIR) -> Callable | None:
    """``commit_kda_replayssm_spec`` of sglang (the commit half of its KDA speculative decoding), or None."""
    path = peers / "linear" / "kda_replayssm_spec_decode.py"
    if not path.exists():
        return None
    return _load("sglang_peer_kda_spec_commit", path).commit_kda_replayssm_spec
