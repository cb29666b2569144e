"""Word alignment on a gold standard (the WPT03 trial set by default): eflomal against every
attnkit method, in one run, one precision / recall / AER table ending in a JSON line.

Run: ``.venv/bin/python benchmarks/alignment.py RUN [--gold-dir DIR] [--threads N]``

``RUN`` is a translate run folder. ``--gold-dir`` holds ``trial.e``, ``trial.f`` and
``trial.wa`` (or ``--source --target --gold`` files in that format). The rows:

* ``diagonal``: each target word linked to the source word at the same relative position
  (the floor any aligner should beat);
* ``eflomal forward / reverse / intersection / grow-diag-final-and``: eflomal fitted on the
  run's training pairs (written as the gold standard writes text,
  `attnkit.alignment.text.aligner_tokens`) together with the pairs to align, as classical
  aligners are used; its links lifted back to the whitespace tokens; once for each number of
  Gibbs samplers in ``--samplers`` (default 3 and 12);
* ``attention L<k> heads avg`` (each decoder layer), ``layers avg`` (with ``--every-head``,
  each head ``L<k> H<h>`` too), each read at the step that predicts a word and at the one
  that reads it (``shift``), ``attention rollout``, then
  ``grad-input`` and ``integrated-gradients`` (with Captum): argmax per target word;
* the best of those attention rows symmetrised with its column-normalised reverse
  (``intersection``, ``grow-diag-final-and``);
* ``translate align defaults``: exactly what ``attnkit translate align --run RUN`` does.

Every attnkit row reads the same forced decoding; the pairs are written as the model's training
text (`attnkit.alignment.text.surface`) and the links mapped back to the given tokens. The
last line is JSON: ``{"rows": [{"method", "precision", "recall", "aer", "links"}], "pairs",
"machine", "command"}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from attnkit.alignment.aligner import (  # noqa: E402
    Method,
    check_pairs,
    pair_pieces,
    piece_matrices,
    word_matrices,
)
from attnkit.alignment.links import alignment_scores, extract, read_gold  # noqa: E402
from attnkit.apps.translate import load_run  # noqa: E402
from attnkit.apps.translate.alignment import (  # noqa: E402
    align_pairs,
    background_pairs,
)
from attnkit.decoding.forced import forced_decode  # noqa: E402
from attnkit.machine import machine_info, machine_line  # noqa: E402

SYMMETRIZED = ("intersection", "grow-diag-final-and")


def diagonal(sources, targets) -> list[set]:
    """Each target word linked to the source word at the same relative position."""
    out = []
    for s, t in zip(sources, targets, strict=True):
        out.append({(min(len(s) - 1, int((j + 0.5) * len(s) / len(t))), j)
                    for j in range(len(t))})
    return out


def eflomal_rows(sources, targets, background, samplers: int) -> list[tuple[str, list[set]]]:
    """eflomal's two directions and their symmetrisations, on whitespace tokens."""
    from attnkit.alignment.aligner import eflomal_word_links

    methods = ("forward", "reverse", "intersection", "grow-diag-final-and")
    found = eflomal_word_links(list(zip(sources, targets, strict=True)), background=background,
                               methods=methods, samplers=samplers)
    return [(f"eflomal {m} ({samplers} samplers)", found[m]) for m in methods]


def method_links(pairs, matrices, symmetrize: str) -> list[set]:
    out = []
    for pair, (fwd, rev) in zip(pairs, matrices, strict=True):
        w_fwd, w_rev = word_matrices(pair, fwd.numpy(), rev.numpy())
        out.append(extract(w_fwd, w_rev, "argmax", symmetrize=symmetrize))
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run")
    p.add_argument("--gold-dir", default=str(Path(__file__).resolve().parents[2] / "shared"
                                             / "data" / "wpt03-trial"))
    p.add_argument("--source"), p.add_argument("--target"), p.add_argument("--gold")
    p.add_argument("--data", help="raw pairs for eflomal (default: the run's training data)")
    p.add_argument("--no-eflomal", action="store_true", help="skip the eflomal rows")
    p.add_argument("--samplers", default="3,12",
                   help="eflomal rows with each of these numbers of Gibbs samplers")
    p.add_argument("--no-gradients", action="store_true", help="skip the attribution rows")
    p.add_argument("--every-head", action="store_true",
                   help="a row for each head of each layer too (a run trained with "
                        "--align-loss: which head learnt the links)")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    folder = Path(args.gold_dir)
    files = [Path(args.source or folder / "trial.e"), Path(args.target or folder / "trial.f"),
             Path(args.gold or folder / "trial.wa")]
    sources, targets = check_pairs(*(f.read_text(encoding="utf-8").splitlines()
                                     for f in files[:2]))
    gold = read_gold(files[2], [len(s) for s in sources], [len(t) for t in targets])
    loaded = load_run(args.run)
    info = machine_info()
    print(f"machine: {machine_line(info)}")
    print(f"command: {' '.join(sys.argv)}  ({len(sources)} pairs)")
    rows: list[dict[str, Any]] = []

    def row(name: str, links: list[set], seconds: float | None = None) -> None:
        s = alignment_scores(links, gold)
        rows.append({"method": name, **{k: round(v, 2) for k, v in s.items()},
                     **({"seconds": round(seconds, 1)} if seconds is not None else {})})
        print(f"{name:52}{s['precision']:>7.1f}{s['recall']:>7.1f}{s['aer']:>7.1f}"
              f"{s['links']:>7}", flush=True)

    print(f"{'method':52}{'prec':>7}{'rec':>7}{'AER':>7}{'links':>7}")
    row("diagonal", diagonal(sources, targets))
    background = background_pairs(loaded, args.data)
    if not args.no_eflomal:
        for samplers in (int(n) for n in args.samplers.split(",")):
            start = time.monotonic()
            for name, links in eflomal_rows(sources, targets, background, samplers):
                row(name, links, time.monotonic() - start)
    pairs = [pair_pieces(loaded.pipeline, s, t) for s, t in zip(sources, targets, strict=True)]
    forced = forced_decode(loaded.model, [q.src_ids for q in pairs], [q.tgt_ids for q in pairs])
    layers, heads = forced[0].attention.shape[:2]
    attention = [Method("attention", layer=k) for k in range(layers)] + [Method("attention")]
    if args.every_head:
        attention += [Method("attention", layer=k, head=h) for k in range(layers)
                      for h in range(heads)]
    attention = [m for a in attention for m in (a, Method(a.kind, a.layer, a.head, True))]
    best, best_aer = None, 101.0
    for method in [*attention, Method("rollout"), Method("rollout", shift=True)]:
        matrices = piece_matrices(pairs, forced, method)
        links = method_links(pairs, matrices, "none")
        row(method.name(), links)
        if rows[-1]["aer"] < best_aer:
            best, best_aer = (method, matrices), rows[-1]["aer"]
    for sym in SYMMETRIZED:
        row(f"{best[0].name()}, {sym}", method_links(pairs, best[1], sym))
    if not args.no_gradients:
        from attnkit.explain.captum import have_captum

        for kind in ("grad-input", "integrated-gradients") if have_captum() else ():
            start = time.monotonic()
            matrices = piece_matrices(pairs, forced, Method(kind), model=loaded.model)
            row(kind, method_links(pairs, matrices, "none"), time.monotonic() - start)
    start = time.monotonic()
    result = align_pairs(loaded, sources, targets, eflomal_data=args.data)
    row(f"translate align defaults ({result.method})", result.links, time.monotonic() - start)
    print(json.dumps({"rows": rows, "pairs": len(sources), "machine": info,
                      "command": " ".join(sys.argv)}))


if __name__ == "__main__":
    main()
