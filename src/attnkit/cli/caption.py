"""``attnkit caption train|eval|predict``: argument parsing only (the work is in apps/)."""

from __future__ import annotations

import argparse
import json
import sys

from attnkit.cli.common import (
    add_eval_options,
    add_predict_options,
    add_train_options,
    apply_threads,
    example_epilog,
    exit_code,
    given,
    read_inputs,
    train_overrides,
    train_target,
)

DATA_HELP = ('"synthetic" (default), "flickr:TOKEN_FILE:IMAGE_DIR" or '
             '"coco:CAPTIONS_JSON:IMAGE_DIR"')
NOTES = f"""

--data is {DATA_HELP}.
Images of any size or mode (grayscale, RGBA, palette) are converted to RGB and resized."""
TRAIN_EPILOG = example_epilog(
    "attnkit caption train --out runs/ducks             # synthetic duck scenes, 2-9 min on CPU",
    "attnkit caption train --out runs/ducks-hard --attention hard --epochs 20",
    "attnkit caption train --resume runs/ducks          # continue an interrupted run exactly",
    "attnkit caption train --resume runs/ducks --max-minutes 20   # ... with a new budget",
    "attnkit caption train --out runs/ducks --overwrite --seed 1  # replace the run",
    "attnkit caption train --out runs/ducks-sup --attention-supervision 1   # fit the boxes",
    "attnkit caption train --out runs/f8k --data flickr:Flickr8k.token.txt:Flicker8k_Dataset",
    "attnkit caption train --out runs/tiny --num-train 64 --image-size 32 --epochs 2",
) + NOTES
EVAL_EPILOG = example_epilog(
    "attnkit caption eval --run runs/ducks                # accuracy, BLEU-4, grounding table",
    "attnkit caption eval --run runs/ducks --json --beam 3",
    "attnkit caption eval --run runs/ducks --report ducks.html   # with examples' attention",
    "attnkit caption eval --run runs/f8k --data coco:captions_val2014.json:val2014",
) + "\n\nWithout --data: the run's own held-out test split (synthetic: scenes of its seed)."
PREDICT_EPILOG = example_epilog(
    "attnkit caption predict --run runs/ducks duck.png --plot duck_attention.png",
    "attnkit caption predict --run runs/ducks a.png b.jpg --html ducks.html --json",
    "ls photos/*.jpg | attnkit caption predict --run runs/f8k     # paths on stdin",
) + ("\n\n--plot FILE writes the overlay grid (.png/.svg/.pdf; FILE-1, FILE-2... for several "
     "images).\nA note on stderr says when an image was resized or a caption word is <unk>.")
EXAMPLES = example_epilog(
    "attnkit caption train --out runs/ducks             # synthetic duck scenes, 2-9 min on CPU",
    "attnkit caption train --resume runs/ducks          # continue an interrupted run exactly",
    "attnkit caption eval --run runs/ducks              # accuracy, BLEU-4, grounding table",
    "attnkit caption predict --run runs/ducks duck.png --plot duck_attention.png",
) + NOTES


def _formatter(prog):
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "caption", help="image captioning with spatial attention (Show, Attend and Tell)",
        description="Train, evaluate and visualise an attention captioner (CNN + LSTM).",
        formatter_class=_formatter, epilog=EXAMPLES)
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    _add_train(sub)
    _add_eval(sub)
    _add_predict(sub)
    return parser


def _add_train(sub) -> None:
    t = sub.add_parser("train", help="train a run", formatter_class=_formatter,
                       description="Train a captioning run. It runs on one CPU thread unless "
                                   "--threads N:\nits small convolutions and per-word LSTM "
                                   "steps gain little from more.", epilog=TRAIN_EPILOG)
    add_train_options(t, data_default="synthetic", data=f"training data: {DATA_HELP}",
                      epochs="passes over the training scenes (default 40)",
                      batch_size="default 32", lr="peak learning rate (default 2e-3, cosine)",
                      max_minutes="stop cleanly after this wall-clock budget (default 9; "
                                  "0 = no budget)")
    # None = not given: a resume then keeps the stored data, a fresh run trains on synthetic.
    t.set_defaults(data=None, threads=1)
    for action in t._actions:  # argparse has no public way to reach one option's help
        if action.dest == "threads":
            action.help = "CPU threads for torch (default 1)"
    t.add_argument("--num-train", type=int, metavar="N", help="synthetic training scenes (6000)")
    t.add_argument("--num-valid", type=int, metavar="N", help="synthetic validation scenes (300)")
    t.add_argument("--num-test", type=int, metavar="N", help="synthetic test scenes (500)")
    t.add_argument("--image-size", type=int, metavar="S",
                   help="image side in pixels, a multiple of 8 (default 64)")
    t.add_argument("--valid-fraction", type=float, metavar="F",
                   help="real data: share of images held out for validation, and as many "
                        "for test (default 0.05)")
    t.add_argument("--attention", choices=["soft", "hard"], help="default soft")
    t.add_argument("--attention-supervision", type=float, metavar="W",
                   help="weight of supervised attention on the synthetic ducks' boxes (default "
                        "0: attention learned from captions only; > 0 trains on what the "
                        "grounding figures score)")
    t.set_defaults(func=run_train)


def _add_eval(sub) -> None:
    e = sub.add_parser("eval", help="accuracy, BLEU-4 and attention grounding on held-out data",
                       formatter_class=_formatter, epilog=EVAL_EPILOG)
    add_eval_options(e, f"evaluate on this data instead: {DATA_HELP} (a real data set "
                        "other than the run's: all its images)")
    e.add_argument("--beam", type=int, default=1, help="beam size (default 1 = greedy)")
    e.add_argument("--num-test", type=int, metavar="N",
                   help="synthetic test scenes (default: the run's)")
    e.set_defaults(func=run_eval)


def _add_predict(sub) -> None:
    p = sub.add_parser("predict", help="caption images and draw each word's attention",
                       formatter_class=_formatter, epilog=PREDICT_EPILOG)
    add_predict_options(p, "IMAGE", "image file(s)")
    p.add_argument("--plot", "--out", dest="plot", metavar="FILE",
                   help="write the overlay grid (one panel per word) of each image here")
    p.add_argument("--beam", type=int, default=1, help="beam size (default 1 = greedy)")
    p.set_defaults(func=run_predict)


def run_train(args) -> int:
    from attnkit.apps.caption import train

    out, resume = train_target(args)
    apply_threads(args.threads)
    overrides = {**train_overrides(args), **given(
        num_train=args.num_train, num_valid=args.num_valid, num_test=args.num_test,
        image_size=args.image_size, valid_fraction=args.valid_fraction,
        attention=args.attention, attention_supervision=args.attention_supervision)}
    result = train(args.data, out, resume=resume, overwrite=args.overwrite, **overrides)
    if result.stop_reason != "signal":
        print(f"run: {out}  stop: {result.stop_reason}  best validation {result.best_metric}")
    return exit_code(result)


def run_eval(args) -> int:
    from attnkit.apps.caption import evaluate, grounding_table

    apply_threads(args.threads)
    metrics = evaluate(args.run, args.data, beam_size=args.beam, device=args.device,
                       num_test=args.num_test, report=args.report)
    if not args.json:
        print(f"exact-match accuracy {metrics['accuracy']:.4f}  BLEU-4 {metrics['bleu4']:.4f}"
              f"  ({metrics['examples']} images, beam {args.beam})")
        if "grounding_mass" in metrics:
            print(grounding_table(metrics))
            if metrics.get("attention_supervision", 0) > 0:
                print(f"note: trained with supervised attention on these boxes (weight "
                      f"{metrics['attention_supervision']:g}): the figures measure fit, not "
                      f"emergent grounding")
        if args.report:
            print(f"wrote {args.report}", file=sys.stderr)
    print(json.dumps(metrics))
    return 0


def run_predict(args) -> int:
    from attnkit.apps.caption import load_run, predict, save_predictions

    apply_threads(args.threads)
    paths = read_inputs(args.inputs, "image")
    run = load_run(args.run, device=args.device)
    preds = predict(run, paths, beam_size=args.beam)
    for pred in preds:
        print(json.dumps(pred.to_dict()) if args.json else pred.caption)
        note = pred.note()
        if note:
            print(note, file=sys.stderr)
    for path in save_predictions(preds, plot=args.plot, html=args.html, summary=run.summary()):
        print(f"wrote {path}", file=sys.stderr)
    return 0
