"""Running the generated Triton code in Triton's CPU interpreter (``TRITON_INTERPRET=1``).

The interpreter cannot run ``libdevice`` calls (extern elementwise), which the generated code uses
for exp / log1p / rsqrt; ``patch_libdevice`` routes them to ``tl.math`` equivalents, looked up at call
time so the interpreter's patched builtins are used. Only the math library is swapped: the kernel's
indexing and masking are what runs on a GPU. The decode calls apply it when the variable is set.
"""

from __future__ import annotations

import functools


@functools.cache
def patch_libdevice() -> None:
    import triton.language as tl
    from torch._inductor.runtime.triton_compat import libdevice

    libdevice.exp = lambda x: tl.math.exp(x)
    libdevice.exp2 = lambda x: tl.math.exp2(x)
    libdevice.log1p = lambda x: tl.math.log(x + 1.0)
    libdevice.rsqrt = lambda x: tl.math.rsqrt(x)
