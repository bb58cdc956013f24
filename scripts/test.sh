#!/usr/bin/env bash
# The test command: lint, the reference and HELION_INTERPRET suites, the TRITON_INTERPRET suite, the
# sanity CLI and the notebooks executed as notebooks (smoke mode). CPU only; GPU tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
ruff check .
ruff format --check .
HELION_INTERPRET=1 MPLBACKEND=Agg python -m pytest -q -m "not triton_interpret" "$@"
TRITON_INTERPRET=1 python -m pytest -q -m triton_interpret "$@"
python -m replayssm_ref >/dev/null
(cd notebooks && python ../scripts/run_notebooks.py)
echo "all checks passed"
