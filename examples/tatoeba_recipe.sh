#!/usr/bin/env bash
# English -> French on the real Tatoeba pairs (train/valid/test files), 30 minutes of training.
#
# Recipe: a joint English+French sentencepiece vocabulary of 8000 pieces (one embedding table
# shared by source, target and output), a pre-norm Transformer (d_model 256, 3+3 layers,
# feed-forward 512, no dropout), batches of <= 128 sentences and <= 1600 padded tokens, peak lr
# 1.5e-3 with 200 warm-up steps and a cosine decay over five epochs, label smoothing 0.1,
# stopped at 30 minutes whatever happens (with the compiled step on an AMX CPU the budget ends
# near the end of the fifth epoch, where the learning rate is almost zero; docs/results.md,
# "The recipe study (issue #45)"). Then sacrebleu BLEU/chrF (cased, 13a) on the test split with beam 5 and
# greedy; the eval table gives both the multi-reference score (adjacent alternative
# translations together) and the one-reference-per-line score.
#
# bf16 autocast is left to the default `--amp auto`: on with CUDA or a CPU with native bf16
# (AMX / AVX512-BF16), float32 otherwise (`--amp on` forces it). The default `--compile auto`
# compiles the training step (a Transformer, a run this long: docs/training.md, "Compiled
# training"); `--compile off` trains it eagerly, as runs before it did. The figures of a full run
# (steps, sentences/s, BLEU) are in docs/results.md ("Translation: English->French on
# Tatoeba") with the date and machine they were recorded on. The budget is wall-clock time:
# on a slower or busier CPU it stops training earlier in the cosine decay.
#
# Usage: bash examples/tatoeba_recipe.sh [DATA_DIR] [RUN_DIR]
# THREADS (default 2): torch threads; use 1 while other processes share the CPU.
set -euo pipefail
DATA=${1:-../shared/data/eng-fra}      # train/valid/test.tsv.gz (see shared/data/README.md)
RUN=${2:-runs/tatoeba}
THREADS=${THREADS:-2}

attnkit translate train --data "$DATA" --out "$RUN" --arch transformer \
    --subword 8000 --d-model 256 --heads 4 --layers 3 --ff-dim 512 --dropout 0 \
    --batch-size 128 --batch-tokens 1600 --max-len 32 \
    --lr 1.5e-3 --warmup 200 --schedule cosine --epochs 5 --label-smoothing 0.1 \
    --max-minutes 30 --threads "$THREADS" --no-progress

attnkit translate eval --run "$RUN" --beam 5 --threads "$THREADS" --json \
    --report "$RUN-test_beam5.html"
attnkit translate eval --run "$RUN" --beam 1 --threads "$THREADS" --json
