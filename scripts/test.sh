#!/usr/bin/env bash
# The test command: lint, format check, the reference and HELION_INTERPRET suites, the
# TRITON_INTERPRET suite, the sanity CLI and the notebooks in smoke mode. CPU only; GPU tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" MPLBACKEND=Agg
ruff check .
ruff format --check .
HELION_INTERPRET=1 python -m pytest -q -m "not triton_interpret" "$@"
TRITON_INTERPRET=1 python -m pytest -q -m triton_interpret "$@"
python -m replayssm_ref >/dev/null
for nb in notebooks/[0-9]*.py; do
  echo "smoke: $nb"
  REPLAYSSM_SMOKE=1 python "$nb" >/dev/null
done
echo "all checks passed"
