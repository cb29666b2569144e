"""Translation decoding speed and BLEU: uncached, cached (attnkit) and CTranslate2, in one run.

Run: ``.venv/bin/python benchmarks/translate_decode.py RUN [--threads N] [--limit N] [--rounds N]``

``RUN`` is a translate run folder (``attnkit translate train``). Every row decodes the same
sentences of the run's test split (the first ``--limit``), with the same threads, one after the
other in this process, and reports sentences per second and BLEU (sacrebleu, one reference per
line, no ``<unk>`` replacement so every engine is scored on its raw output):

* ``attnkit-uncached``: :func:`attnkit.decoding.decode_many` with ``use_cache=False`` (the
  Transformer recomputes the whole target prefix every step; the RNN re-projects the attention
  keys every step): the baseline the others are compared with;
* ``attnkit``: the same with the key/value cache (incremental decoding), ``need_weights=False``;
* ``ctranslate2-float32`` / ``ctranslate2-int8``: the run exported with
  :func:`attnkit.serving.ctranslate2.export_ctranslate2` (skipped, with the reason, when
  CTranslate2 is not installed or the run is an RNN), run by ``--threads`` workers of one
  thread each (:func:`attnkit.serving.ctranslate2.load_translator`).

Greedy and beam 5 (alpha 0.6; CTranslate2 normalises beams by ``length ** 0.6`` instead of the
GNMT penalty). Each row decodes a few sentences first as warm-up; the rows of one beam size
are then timed interleaved, ``--rounds`` times (median reported). ``speedup`` is against
``attnkit-uncached`` at the same beam. The last line is JSON: ``{"rows": [{"engine", "beam",
"sent_per_s", "bleu", ...}], "machine": {...}}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sacrebleu
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from attnkit.apps import Loaded as Run  # noqa: E402
from attnkit.apps.translate import load_run  # noqa: E402
from attnkit.data.text_codec import SRC_LANG, TGT_LANG  # noqa: E402
from attnkit.data.translation_splits import eval_pairs  # noqa: E402
from attnkit.decoding import decode_many  # noqa: E402
from attnkit.errors import AttnkitError  # noqa: E402
from attnkit.machine import machine_info, machine_line  # noqa: E402
from attnkit.models.config import TransformerConfig  # noqa: E402

BEAMS = (1, 5)
ALPHA = 0.6
WARMUP = 8


def machine() -> dict[str, Any]:
    """:func:`attnkit.machine.machine_info` plus the CTranslate2 version (None: not installed)."""
    info = machine_info()
    try:
        import ctranslate2
        info["ctranslate2"] = ctranslate2.__version__
    except ImportError:
        info["ctranslate2"] = None
    return info


def machine_text(info: dict[str, Any]) -> str:
    return f"machine: {machine_line(info)}, ctranslate2 {info['ctranslate2']}"


def timed(fn: Callable[[Sequence[Any]], list[str]], sources: Sequence[Any]
          ) -> tuple[list[str], float]:
    """Decode all sources once: (hypotheses, sentences per second)."""
    start = time.perf_counter()
    hyps = fn(sources)
    return hyps, len(sources) / max(time.perf_counter() - start, 1e-9)


def attnkit_engine(run: Run, beam: int, use_cache: bool) -> Callable:
    """A run's model and pipeline (:func:`attnkit.apps.translate.load_run`) as an engine:
    source ids -> output texts."""
    p = run.pipeline
    skip = {p.tgt_vocab.pad_id, p.tgt_vocab.bos_id, p.tgt_vocab.eos_id}

    def decode(ids: Sequence[list[int]]) -> list[str]:
        hyps = decode_many(run.model, ids, beam=beam, alpha=ALPHA, need_weights=False,
                           use_cache=use_cache)
        return [p.codec.decode([p.tgt_vocab.itos[i] for i in h.tokens if i not in skip],
                               TGT_LANG) for h in hyps]
    return decode


def ct2_engine(run: Run, model_dir: Path, beam: int, threads: int) -> Callable:
    from attnkit.serving.ctranslate2 import load_translator, translate_tokens

    p = run.pipeline
    translator = load_translator(model_dir, threads=threads)

    def decode(ids: Sequence[list[int]]) -> list[str]:
        tokens = [[p.src_vocab.itos[i] for i in s] for s in ids]
        outs = translate_tokens(translator, tokens, beam=beam,
                                length_penalty=ALPHA if beam > 1 else None)
        return [p.codec.decode(o.tokens, TGT_LANG) for o in outs]
    return decode


def ct2_models(run: Run, folder: Path) -> dict[str, Path] | str:
    """Export the run's model (its loaded weights) as float32 and int8 CTranslate2 models, or
    the reason why not."""
    if not isinstance(run.model.config, TransformerConfig):
        return "RNN run: CTranslate2 runs Transformers only"
    try:
        from attnkit.serving.ctranslate2 import export_ctranslate2, require_ctranslate2
        require_ctranslate2()
    except AttnkitError as exc:
        return str(exc)
    p, state = run.pipeline, run.model.state_dict()
    return {q: export_ctranslate2(run.model.config, state, p.src_vocab.itos, p.tgt_vocab.itos,
                                  folder / q, quantization=q)
            for q in ("float32", "int8")}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--limit", type=int, default=1000, help="test sentences (default 1000)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per row (median)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    run = load_run(args.run)
    p = run.pipeline
    pairs = eval_pairs(None, run.config["data"])[: args.limit]
    ids = [p.src_vocab.encode(p.codec.encode(en, SRC_LANG)) for en, _ in pairs]
    refs = [fr for _, fr in pairs]
    info = machine()
    print(machine_text(info))
    print(f"command: {' '.join(sys.argv)}  ({len(ids)} sentences)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="attnkit-ct2-") as tmp:
        exported = ct2_models(run, Path(tmp))
        for beam in BEAMS:
            engines = [("attnkit-uncached", attnkit_engine(run, beam, False)),
                       ("attnkit", attnkit_engine(run, beam, True))]
            for q in ("float32", "int8"):
                name = f"ctranslate2-{q}"
                engines.append((name, exported if isinstance(exported, str)
                                else ct2_engine(run, exported[q], beam, args.threads)))
            rows += measure(engines, beam, ids, refs, args.rounds)
    print_table(rows)
    print(json.dumps({"rows": rows, "machine": info}))


def measure(engines: list[tuple[str, Callable | str]], beam: int, ids: Sequence[list[int]],
            refs: Sequence[str], rounds: int) -> list[dict[str, Any]]:
    """Time the engines of one beam size interleaved (A, B, C, A, B, C, ...) after a warm-up
    each, so that load from other processes spreads over all of them; the median speed of
    ``rounds`` is reported, BLEU from the first round (decoding is deterministic)."""
    rows, runnable = [], []
    for name, engine in engines:
        row: dict[str, Any] = {"engine": name, "beam": beam, "sent_per_s": None, "bleu": None}
        if isinstance(engine, str):
            row["skipped"] = engine
        else:
            engine(ids[:WARMUP])
            runnable.append((row, engine, []))
        rows.append(row)
    for r in range(rounds):
        for row, engine, speeds in runnable:
            hyps, speed = timed(engine, ids)
            speeds.append(speed)
            if r == 0:
                row["bleu"] = round(sacrebleu.corpus_bleu(hyps, [list(refs)]).score, 2)
    for row, _, speeds in runnable:
        row["sent_per_s"] = round(statistics.median(speeds), 1)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    base = {r["beam"]: r["sent_per_s"] for r in rows if r["engine"] == "attnkit-uncached"}
    print(f"{'engine':<22}{'beam':>5}{'sent/s':>10}{'speedup':>9}{'BLEU':>8}")
    for r in rows:
        if r["sent_per_s"] is None:
            print(f"{r['engine']:<22}{r['beam']:>5}  skipped: {r['skipped']}")
            continue
        speedup = r["sent_per_s"] / base[r["beam"]] if base.get(r["beam"]) else float("nan")
        r["speedup"] = round(speedup, 2)
        print(f"{r['engine']:<22}{r['beam']:>5}{r['sent_per_s']:>10.1f}{speedup:>8.2f}x"
              f"{r['bleu']:>8.2f}")


if __name__ == "__main__":
    main()
