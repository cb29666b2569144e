"""``attnkit caption train|eval|predict``: argument parsing only (the work is in apps/)."""

from __future__ import annotations

import argparse
import json

from attnkit.cli.common import add_train_options

EXAMPLES = """examples:
  attnkit caption train --out runs/ducks                  # synthetic duck scenes, 2-9 min on CPU
  attnkit caption train --out runs/ducks-hard --attention hard --epochs 20
  attnkit caption train --resume runs/ducks               # continue an interrupted run exactly
  attnkit caption train --out runs/ducks-sup --attention-supervision 1   # attention fit to boxes
  attnkit caption train --out runs/f8k --data flickr:Flickr8k.token.txt:Flicker8k_Dataset
  attnkit caption eval --run runs/ducks                   # accuracy, BLEU-4, grounding table
  attnkit caption predict --run runs/ducks duck.png --out duck_attention.png --html duck.html

--data is "synthetic" (default), "flickr:TOKEN_FILE:IMAGE_DIR" or "coco:CAPTIONS_JSON:IMAGE_DIR".
Images of any size or mode (grayscale, RGBA, palette) are converted to RGB and resized.
"""


def _formatter(prog):
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "caption", help="image captioning with spatial attention (Show, Attend and Tell)",
        description="Train, evaluate and visualise an attention captioner (CNN + LSTM).",
        formatter_class=_formatter, epilog=EXAMPLES)
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True

    t = sub.add_parser("train", help="train a run", description="Train a captioning run.",
                       epilog=EXAMPLES, formatter_class=_formatter)
    t.add_argument("--out", help="run folder to create")
    t.add_argument("--data", default="synthetic", help="synthetic | flickr:... | coco:...")
    add_train_options(t, max_minutes="stop cleanly after this wall-clock budget (default 9)")
    t.add_argument("--num-train", type=int, metavar="N", help="synthetic training scenes")
    t.add_argument("--num-valid", type=int, metavar="N", help="synthetic validation scenes")
    t.add_argument("--num-test", type=int, metavar="N", help="synthetic test scenes")
    t.add_argument("--image-size", type=int, metavar="S", help="image side in pixels (64)")
    t.add_argument("--attention", choices=["soft", "hard"], default="soft")
    t.add_argument("--attention-supervision", type=float, default=0.0, metavar="W",
                   help="weight of supervised attention on the synthetic ducks' boxes (default "
                        "0: attention learned from captions only; > 0 trains on what the "
                        "grounding figures score)")
    t.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads while training (default 1; 0 = torch's default)")
    t.add_argument("--no-progress", action="store_true")
    t.set_defaults(func=run_train)

    e = sub.add_parser("eval", help="accuracy, BLEU-4 and attention grounding on held-out data",
                       formatter_class=_formatter, epilog=EXAMPLES)
    e.add_argument("--run", required=True)
    e.add_argument("--beam", type=int, default=1, help="beam size (1 = greedy)")
    e.add_argument("--num-test", type=int, metavar="N", help="synthetic test scenes")
    e.add_argument("--device", default="cpu")
    e.add_argument("--json", action="store_true", help="only the JSON line")
    e.set_defaults(func=run_eval)

    p = sub.add_parser("predict", help="caption an image and draw each word's attention",
                       formatter_class=_formatter, epilog=EXAMPLES)
    p.add_argument("--run", required=True)
    p.add_argument("image", metavar="IMAGE")
    p.add_argument("--out", metavar="FIG.png", help="overlay grid, one panel per word")
    p.add_argument("--html", metavar="FILE", help="HTML report (caption + overlays)")
    p.add_argument("--beam", type=int, default=1, help="beam size (1 = greedy)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", action="store_true", help="print the caption as JSON")
    p.set_defaults(func=run_predict)
    return parser


def run_train(args) -> int:
    from attnkit.apps.caption import train

    if not args.out and not args.resume:
        raise SystemExit("attnkit caption train: error: give --out RUN (or --resume RUN)")
    result = train(args.resume or args.out, args.data, num_train=args.num_train,
                   num_valid=args.num_valid, num_test=args.num_test,
                   image_size=args.image_size, attention=args.attention,
                   resume=bool(args.resume), threads=args.threads or None,
                   attention_supervision=args.attention_supervision,
                   epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                   device=args.device, max_minutes=args.max_minutes,
                   progress=not args.no_progress)
    print(f"run: {args.resume or args.out}  stop: {result.stop_reason}  best validation "
          f"{result.best_metric}")
    return 0


def run_eval(args) -> int:
    from attnkit.apps.caption import evaluate, grounding_table

    metrics = evaluate(args.run, beam_size=args.beam, device=args.device,
                       num_test=args.num_test)
    if not args.json:
        print(f"exact-match accuracy {metrics['accuracy']:.4f}  BLEU-4 {metrics['bleu4']:.4f}"
              f"  ({metrics['examples']} images, beam {args.beam})")
        if "grounding_mass" in metrics:
            print(grounding_table(metrics))
            if metrics.get("attention_supervision", 0) > 0:
                print(f"note: trained with supervised attention on these boxes (weight "
                      f"{metrics['attention_supervision']:g}): the figures measure fit, not "
                      f"emergent grounding")
    print(json.dumps(metrics))
    return 0


def run_predict(args) -> int:
    from attnkit.apps.caption import predict

    pred = predict(args.run, args.image, out=args.out, html=args.html, beam_size=args.beam,
                   device=args.device)
    if args.json:
        print(json.dumps({"caption": pred.caption, "words": pred.words}))
    else:
        print(pred.caption)
    for path in (pred.figure, pred.html):
        if path is not None:
            print(f"wrote {path}")
    return 0
