#!/usr/bin/env bash
# Creates (or reuses) .venv and installs attnkit with its dev tools.
# torch is pinned to the CPU build that this machine kind carries on disk; set
# ATTNKIT_TORCH_SPEC="torch" (or any spec) to bring your own, e.g. a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.attnkit-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] \
   || [ scripts/setup-env.sh -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "${ATTNKIT_TORCH_SPEC:-torch==2.13.0}"
  .venv/bin/python -m pip install -q -e ".[dev,subword,docs,serve,align,explain]"
  touch "$stamp"
fi
