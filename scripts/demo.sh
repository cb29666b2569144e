#!/usr/bin/env bash
# Set-up (if needed), then the main job on the built-in default: train an English->French
# translator with attention on the synthetic corpus (no download), evaluate it, translate a few
# sentence and write its attention (a heatmap, an explorer page) and an HTML report into runs/demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
out=${1:-runs/demo}
.venv/bin/attnkit translate train --data synthetic --out "$out" --overwrite   # replaces an earlier demo run
.venv/bin/attnkit translate eval --run "$out" --data synthetic
.venv/bin/attnkit translate predict --run "$out" --plot "$out/heatmap.png" \
  --html "$out/attention.html" \
  "Your tired dogs will not find her."
