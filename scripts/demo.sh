#!/usr/bin/env bash
# Set-up (if needed), then the main job on the built-in default: train an English->French
# translator with attention on the synthetic corpus (no download), evaluate it, translate a
# sentence and write its attention beside the run (a heatmap, runs/demo.png, and an explorer page,
# runs/demo.html: a run folder holds only what its own commands write).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
out=${1:-runs/demo}
# One epoch, no clock budget, float32: the same model on any machine, fast or slow, so the first
# picture is one it was checked to translate right (tests/test_readme.py).
.venv/bin/attnkit translate train --data synthetic --out "$out" --overwrite --epochs 1 --max-minutes 0 --amp off   # replaces an earlier demo run
.venv/bin/attnkit translate eval --run "$out" --data synthetic
.venv/bin/attnkit translate predict --run "$out" --plot "$out.png" \
  --html "$out.html" \
  "Your tired dogs will not find her."
