#!/usr/bin/env bash
# English -> French on Tatoeba with a trained word aligner, 30 minutes of training in all.
#
# Recipe: the Tatoeba recipe's Transformer (examples/tatoeba_recipe.sh: joint 8000-piece
# sentencepiece vocabulary, d_model 256, 3+3 layers, label smoothing 0.1, cosine schedule over
# five epochs), trained for 28.5 minutes instead of 30; then `attnkit translate align-train` in
# the remaining 1.5 minutes: eflomal (pip install 'attnkit[align]') aligns the run's 160,000
# training pairs, and an alignment head is fitted on its links of 20,000 of them, reading the
# frozen model's decoder states and cross-attention. The translation model is not changed by
# the aligner. `attnkit translate align --run RUN --source S --target T` then gives eflomal's
# links, fitted on the pairs and the run's training pairs (its default: the best measured on
# the WPT03 trial set); `--method head` gives the trained aligner's, adapted to the pairs
# (docs/results.md, "Word alignment").
#
# Usage: bash examples/alignment_recipe.sh [DATA_DIR] [RUN_DIR]
# THREADS (default 2): torch threads; use 1 while other processes share the CPU.
# GOLD_DIR (default ../shared/data/wpt03-trial): when it holds trial.e/.f/.wa, the run's
# alignments (the default and the trained aligner's) are scored on it at the end.
set -euo pipefail
DATA=${1:-../shared/data/eng-fra}      # train/valid/test.tsv.gz (see shared/data/README.md)
RUN=${2:-runs/alignment}
THREADS=${THREADS:-2}
GOLD_DIR=${GOLD_DIR:-../shared/data/wpt03-trial}

attnkit translate train --data "$DATA" --out "$RUN" --arch transformer \
    --subword 8000 --d-model 256 --heads 4 --layers 3 --ff-dim 512 --dropout 0 \
    --batch-size 128 --batch-tokens 1600 --max-len 32 \
    --lr 1.5e-3 --warmup 200 --schedule cosine --epochs 5 --label-smoothing 0.1 \
    --max-minutes 28.5 --threads "$THREADS" --no-progress

attnkit translate align-train --run "$RUN" --max-minutes 1.5 --threads "$THREADS"

attnkit translate eval --run "$RUN" --beam 5 --threads "$THREADS" --json
if [ -f "$GOLD_DIR/trial.wa" ]; then
  for method in eflomal head; do
    attnkit translate align --run "$RUN" --source "$GOLD_DIR/trial.e" \
        --target "$GOLD_DIR/trial.f" --gold "$GOLD_DIR/trial.wa" --method "$method" \
        --out "$RUN-trial-$method.wa" --threads "$THREADS"
  done
fi
