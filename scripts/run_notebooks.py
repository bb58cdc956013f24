"""Execute every notebook as a notebook, in smoke mode: jupytext turns ``notebooks/NN_*.py`` into a
notebook, nbclient runs it in a fresh kernel with ``notebooks/`` as the working directory (where
JupyterLab starts its kernels). Exit 1 if a cell fails. Used by ``scripts/test.sh``."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import jupytext
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    os.environ["REPLAYSSM_SMOKE"] = "1"
    os.environ.pop("MPLBACKEND", None)  # the kernel's own inline backend, as in JupyterLab
    for path in sorted((ROOT / "notebooks").glob("[0-9]*.py")):
        start = time.time()
        nb = jupytext.read(path)
        NotebookClient(
            nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        ).execute()
        figures = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
        print(f"notebook {path.name}: ran in {time.time() - start:.0f} s, {figures} inline figures", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
