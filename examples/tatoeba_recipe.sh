#!/usr/bin/env bash
# English -> French on the real Tatoeba pairs (train/valid/test files), 30 minutes of training,
# and its word alignment scored on the WPT03 trial set where it is there.
#
# Recipe (docs/results.md, "The recipe study (issue #45)"): a joint English+French
# sentencepiece vocabulary of 16,000 pieces (one embedding table shared by source, target and
# output), a pre-norm Transformer (d_model 256, 3+3 layers, feed-forward 512, no dropout),
# batches of at most 1,600 padded tokens a side (the cap of 1,024 sentences never binds), peak
# lr 1.5e-3 with 200 warm-up steps and a cosine decay over five epochs, label smoothing 0.1,
# and Garg et al.'s alignment loss (weight 0.05): eflomal (pip install 'attnkit[align]')
# labels the training pairs once, in about 40 s before the first step, and one head learns
# its links as the model trains. Training stops at 29 minutes whatever happens, so that labels
# and training fit in 30 (with the compiled step on an AMX CPU it stops late in the fifth
# epoch, where the learning rate is almost zero). Then sacrebleu BLEU/chrF (cased, 13a) on
# the test split with beam 5 and greedy; the eval table gives both the multi-reference score
# (adjacent alternative translations together) and the one-reference-per-line score.
#
# bf16 autocast is left to the default `--amp auto`: on with CUDA or a CPU with native bf16
# (AMX / AVX512-BF16), float32 otherwise (`--amp on` forces it). The default `--compile auto`
# compiles the training step (a Transformer, a run this long: docs/training.md, "Compiled
# training"). The budget is wall-clock time: on a slower or busier CPU it stops training
# earlier in the cosine decay.
#
# Word alignment: `attnkit translate align` gives eflomal's links by default (fitted on the
# pairs and the run's training pairs); `--method attention` without --layer/--head reads the
# head the alignment loss trained. With GOLD_DIR holding trial.e/.f/.wa, both are scored.
#
# Usage: bash examples/tatoeba_recipe.sh [DATA_DIR] [RUN_DIR]
# THREADS (default 2): torch threads; use 1 while other processes share the CPU.
# GOLD_DIR (default ../shared/data/wpt03-trial): where the trial set's files are, if anywhere.
set -euo pipefail
DATA=${1:-../shared/data/eng-fra}      # train/valid/test.tsv.gz (see shared/data/README.md)
RUN=${2:-runs/tatoeba}
THREADS=${THREADS:-2}
GOLD_DIR=${GOLD_DIR:-../shared/data/wpt03-trial}

attnkit translate train --data "$DATA" --out "$RUN" --arch transformer \
    --subword 16000 --d-model 256 --heads 4 --layers 3 --ff-dim 512 --dropout 0 \
    --batch-size 1024 --batch-tokens 1600 --max-len 32 \
    --lr 1.5e-3 --warmup 200 --schedule cosine --epochs 5 --label-smoothing 0.1 \
    --align-loss 0.05 --max-minutes 29 --threads "$THREADS" --no-progress

attnkit translate eval --run "$RUN" --beam 5 --threads "$THREADS" --json \
    --report "$RUN-test_beam5.html"
attnkit translate eval --run "$RUN" --beam 1 --threads "$THREADS" --json
if [ -f "$GOLD_DIR/trial.wa" ]; then
  for method in eflomal attention; do
    attnkit translate align --run "$RUN" --source "$GOLD_DIR/trial.e" \
        --target "$GOLD_DIR/trial.f" --gold "$GOLD_DIR/trial.wa" --method "$method" \
        --out "$RUN-trial-$method.wa" --threads "$THREADS"
  done
fi
