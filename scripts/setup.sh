#!/usr/bin/env bash
# Create .venv (Python 3.11) with everything the reference, the kernels (CPU interpret modes), the
# tests and the notebooks need. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch==2.13.0 first: a looser spec could pull a multi-GB CUDA build onto a CPU machine.
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e '.[notebook,dev,cpu-interpret]'
# JupyterLab opens the notebooks/*.py (jupytext percent format) as notebooks
mkdir -p .venv/share/jupyter/lab/settings
cat > .venv/share/jupyter/lab/settings/overrides.json <<'JSON'
{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"python": "Jupytext Notebook"}}}
JSON
.venv/bin/python -c 'import torch, helion, triton; print(f"ready: torch {torch.__version__}, triton {triton.__version__}")'
