#!/usr/bin/env bash
# Set-up (if needed), lint and the whole test suite. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
.venv/bin/ruff check src tests benchmarks examples
.venv/bin/python -m pytest "$@"
