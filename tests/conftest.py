"""Test-wide setup. Device-dependent tests take the ``device`` fixture; GPU-only ones are marked ``gpu``."""

from __future__ import annotations

import os

import pytest
import torch


def _patch_libdevice_for_triton_interpreter() -> None:
    """Triton's CPU interpreter cannot run ``libdevice`` calls (extern elementwise), which Inductor
    emits for exp/log1p/rsqrt; route them to ``tl.math`` equivalents, looked up at call time so the
    interpreter's patched builtins are used. Only the math library is swapped; the generated kernel
    code is otherwise what runs on a GPU."""
    import triton.language as tl
    from torch._inductor.runtime.triton_compat import libdevice

    libdevice.exp = lambda x: tl.math.exp(x)
    libdevice.exp2 = lambda x: tl.math.exp2(x)
    libdevice.log1p = lambda x: tl.math.log(x + 1.0)
    libdevice.rsqrt = lambda x: tl.math.rsqrt(x)


if os.environ.get("TRITON_INTERPRET") == "1":
    _patch_libdevice_for_triton_interpreter()


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"
