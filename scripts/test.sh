#!/usr/bin/env bash
# Set-up (if needed), lint, the import contracts, the docs site (offline) and the whole test
# suite. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
.venv/bin/ruff check src tests benchmarks examples
.venv/bin/lint-imports
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet
.venv/bin/python -m pytest "$@"
