#!/usr/bin/env bash
# Set-up (if needed), lint, the import contracts, the docs site (offline) and the whole test
# suite. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
# The browser tests (pytest -m browser) drive Debian's Chromium: install it when we can (root and
# apt); otherwise, or if the install fails, those tests skip and say why.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
        >/dev/null; } || echo "test.sh: could not install chromium; browser tests will skip" >&2
  else
    echo "test.sh: no chromium (installing it needs root); browser tests will skip" >&2
  fi
fi
.venv/bin/ruff check src tests benchmarks examples
.venv/bin/lint-imports
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet
# A docstring the renderer cannot read shows as raw reStructuredText on the site: fail on it.
.venv/bin/python scripts/check_docs.py build/site
.venv/bin/python -m pytest "$@"
