"""Translation decoding speed and BLEU: attnkit (cached, uncached) and CTranslate2, in one run.

Run: ``.venv/bin/python benchmarks/translate_decode.py RUN [--threads N] [--limit N]
[--rounds N] [--batches 1,32,all] [--beams 1,5] [--engines NAME,...]``

``RUN`` is a translate run folder (``attnkit translate train``). Every row decodes the same
sentences of the run's test split (the first ``--limit``), with the same threads, in this
process (with the memory settings the ``attnkit`` command starts with,
`attnkit.allocator.reuse_freed_memory`), and reports sentences per second and BLEU
(sacrebleu, one reference per line, no ``<unk>`` replacement so every engine is scored on its
raw output). The engines:

* ``attnkit``: `attnkit.decoding.decode_many` with incremental decoding, no attention asked
  (what ``eval`` and the server run eagerly);
* ``attnkit-compiled``: the same through the run's compiled graphs
  (`attnkit.models.compiled`, built into the user's cache first if they are not there);
* ``attnkit-uncached``: the same on the model's reference path (a Transformer recomputes the
  whole target prefix every step; an RNN re-projects its attention keys every step);
* ``ctranslate2-float32`` / ``ctranslate2-int8``: the run exported with
  `attnkit.ct2_export.ctranslate2.export_ctranslate2` (skipped, with the reason, when CTranslate2
  is not installed or the run is an RNN), run by ``--threads`` workers of one thread each
  (`attnkit.ct2_export.ctranslate2.load_translator`).

``batch`` is how many sentences one call decodes: ``1`` (one sentence a call, as a lone
request), ``32`` (32 consecutive test sentences a call, as a server holding 32 requests) or
``"all"`` (every sentence in one call: the engine batches them itself). Greedy and beam 5
(alpha 0.6; CTranslate2 normalises beams by ``length ** 0.6`` instead of the GNMT penalty).
Each row decodes a few sentences first as warm-up; the rows of one (beam, batch) pair are then
timed interleaved, ``--rounds`` times, and the median is reported with ``spread`` (slowest
round / fastest). ``vs_ct2`` is against ``ctranslate2-float32`` at the same beam and batch.
The last line is JSON: ``{"rows": [{"engine", "beam", "batch", "sent_per_s", "spread",
"bleu", "vs_ct2", ...}], "compile": {"cold_s", "warm_s"}, "machine": {...}}``; ``compile`` is
the seconds from loading the run in a fresh process to its first compiled translation, with an
empty cache (``cold_s``) and then a warm one (``warm_s``); null without ``attnkit-compiled``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sacrebleu
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from attnkit.allocator import reuse_freed_memory  # noqa: E402
from attnkit.apps import Loaded as Run  # noqa: E402
from attnkit.apps.translate import load_run  # noqa: E402
from attnkit.data.text_codec import SRC_LANG, TGT_LANG  # noqa: E402
from attnkit.data.translation_splits import eval_pairs  # noqa: E402
from attnkit.decoding import decode_many  # noqa: E402
from attnkit.errors import AttnkitError  # noqa: E402
from attnkit.machine import machine_info, machine_line  # noqa: E402
from attnkit.models.config import TransformerConfig  # noqa: E402

ENGINES = ("attnkit", "attnkit-compiled", "attnkit-uncached", "ctranslate2-float32",
           "ctranslate2-int8")
ALPHA = 0.6
WARMUP = 8

Decode = Callable[[Sequence[list[int]]], list[str]]


def machine() -> dict[str, Any]:
    """`attnkit.machine.machine_info` plus the CTranslate2 version (None: not installed)."""
    info = machine_info()
    try:
        import ctranslate2
        info["ctranslate2"] = ctranslate2.__version__
    except ImportError:
        info["ctranslate2"] = None
    return info


def machine_text(info: dict[str, Any]) -> str:
    return f"machine: {machine_line(info)}, ctranslate2 {info['ctranslate2']}"


def attnkit_engine(run: Run, beam: int, use_cache: bool, compiled: bool = False
                   ) -> Decode | str:
    """A run's model and pipeline (`attnkit.apps.translate.load_run`) as an engine: source
    ids -> output texts; ``compiled``: its compiled graphs (or why there are none)."""
    p = run.pipeline
    skip = {p.tgt_vocab.pad_id, p.tgt_vocab.bos_id, p.tgt_vocab.eos_id}
    model = run.model
    if compiled:
        if not isinstance(run.model.config, TransformerConfig) or not run.engine.compile():
            return "compiled decoding is for Transformer runs, where it can be built"
        model = run.engine.fast

    def decode(ids: Sequence[list[int]]) -> list[str]:
        hyps = decode_many(model, ids, beam=beam, alpha=ALPHA, need_weights=False,
                           use_cache=use_cache)
        return [p.codec.decode([p.tgt_vocab.itos[i] for i in h.tokens if i not in skip],
                               TGT_LANG) for h in hyps]
    return decode


def ct2_engine(run: Run, translator: Any, beam: int) -> Decode:
    from attnkit.ct2_export.ctranslate2 import translate_tokens

    p = run.pipeline

    def decode(ids: Sequence[list[int]]) -> list[str]:
        tokens = [[p.src_vocab.itos[i] for i in s] for s in ids]
        outs = translate_tokens(translator, tokens, beam=beam,
                                length_penalty=ALPHA if beam > 1 else None)
        return [p.codec.decode(o.tokens, TGT_LANG) for o in outs]
    return decode


def ct2_translators(run: Run, folder: Path, threads: int) -> dict[str, Any] | str:
    """The run's model (its loaded weights) exported as float32 and int8 CTranslate2 models
    and loaded, or the reason why not."""
    if not isinstance(run.model.config, TransformerConfig):
        return "RNN run: CTranslate2 runs Transformers only"
    try:
        from attnkit.ct2_export.ctranslate2 import (
            export_ctranslate2,
            load_translator,
            require_ctranslate2,
        )
        require_ctranslate2()
    except AttnkitError as exc:
        return str(exc)
    p, state = run.pipeline, run.model.state_dict()
    return {q: load_translator(export_ctranslate2(run.model.config, state, p.src_vocab.itos,
                                                  p.tgt_vocab.itos, folder / q, quantization=q),
                               threads=threads)
            for q in ("float32", "int8")}


def in_calls(decode: Decode, batch: int | str) -> Decode:
    """``decode`` called on ``batch`` consecutive sentences at a time (``"all"``: one call)."""
    if batch == "all":
        return decode

    def calls(ids: Sequence[list[int]]) -> list[str]:
        out: list[str] = []
        for start in range(0, len(ids), int(batch)):
            out += decode(ids[start:start + int(batch)])
        return out
    return calls


def timed(fn: Decode, sources: Sequence[list[int]]) -> tuple[list[str], float]:
    """Decode all sources once: (hypotheses, sentences per second)."""
    start = time.perf_counter()
    hyps = fn(sources)
    return hyps, len(sources) / max(time.perf_counter() - start, 1e-9)


def measure(engines: list[tuple[str, Decode | str]], beam: int, batch: int | str,
            ids: Sequence[list[int]], refs: Sequence[str], rounds: int) -> list[dict[str, Any]]:
    """Time the engines of one (beam, batch) pair interleaved (A, B, C, A, B, C, ...) after a
    warm-up each, so that load from other processes spreads over all of them; the median
    speed of ``rounds`` is reported with its spread, BLEU from the first round (decoding is
    deterministic)."""
    rows, runnable = [], []
    for name, engine in engines:
        row: dict[str, Any] = {"engine": name, "beam": beam, "batch": batch,
                               "sent_per_s": None, "bleu": None}
        if isinstance(engine, str):
            row["skipped"] = engine
        else:
            engine = in_calls(engine, batch)
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
        row["spread"] = round(max(speeds) / min(speeds), 2)
    return rows


def compare(rows: list[dict[str, Any]]) -> None:
    """``vs_ct2``: each row's speed over ``ctranslate2-float32``'s at the same beam and batch
    (None where either is missing)."""
    base = {(r["beam"], r["batch"]): r["sent_per_s"] for r in rows
            if r["engine"] == "ctranslate2-float32"}
    for r in rows:
        ref = base.get((r["beam"], r["batch"]))
        r["vs_ct2"] = round(r["sent_per_s"] / ref, 2) if ref and r["sent_per_s"] else None


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'engine':<22}{'beam':>5}{'batch':>6}{'sent/s':>10}{'spread':>8}{'vs ct2':>8}"
          f"{'BLEU':>8}")
    for r in rows:
        if r["sent_per_s"] is None:
            print(f"{r['engine']:<22}{r['beam']:>5}{r['batch']:>6}  skipped: {r['skipped']}")
            continue
        ratio = "" if r["vs_ct2"] is None else f"{r['vs_ct2']:.2f}x"
        print(f"{r['engine']:<22}{r['beam']:>5}{r['batch']:>6}{r['sent_per_s']:>10.1f}"
              f"{r['spread']:>8.2f}{ratio:>8}{r['bleu']:>8.2f}")


def first_compiled(run: str, threads: int) -> float:
    """Seconds from loading ``run`` to its first compiled translation, in this (fresh)
    process."""
    torch.set_num_threads(threads)
    start = time.perf_counter()
    loaded = load_run(run, compile="on")
    loaded.engine.translate(["I am cold."])
    if loaded.engine.fast is None:
        raise SystemExit("decoding could not be compiled")
    return time.perf_counter() - start


def compile_seconds(run: str, threads: int) -> dict[str, float]:
    """`first_compiled` in a fresh process with an empty cache, then in another with it
    warm."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="attnkit-cache-") as cache:
        env = {**os.environ, "ATTNKIT_CACHE": cache}
        env.pop("TORCHINDUCTOR_CACHE_DIR", None)
        for name in ("cold_s", "warm_s"):
            done = subprocess.run([sys.executable, __file__, run, "--threads", str(threads),
                                   "--first-compiled"], env=env, capture_output=True,
                                  text=True, check=True)
            out[name] = round(float(done.stdout.strip().splitlines()[-1]), 1)
    return out


def parse_batch(text: str) -> int | str:
    if text == "all":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a batch is a whole number >= 1 or 'all', got {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--limit", type=int, default=1000, help="test sentences (default 1000)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per row (median)")
    p.add_argument("--batches", default="1,32,all",
                   help="sentences per call, comma-separated (default 1,32,all)")
    p.add_argument("--beams", default="1,5", help="beam sizes (default 1,5)")
    p.add_argument("--engines", default=",".join(ENGINES),
                   help=f"comma-separated, of {', '.join(ENGINES)} (default: all)")
    p.add_argument("--first-compiled", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.first_compiled:   # a child of compile_seconds
        print(first_compiled(args.run, args.threads))
        return
    batches = [parse_batch(b) for b in args.batches.split(",")]
    beams = [int(b) for b in args.beams.split(",")]
    names = args.engines.split(",")
    unknown = sorted(set(names) - set(ENGINES))
    if unknown:
        p.error(f"unknown engines {unknown}; choose from {', '.join(ENGINES)}")
    torch.set_num_threads(args.threads)
    reuse_freed_memory()   # as the attnkit command does at start (eval, serve)
    run = load_run(args.run)
    pipe = run.pipeline
    pairs = eval_pairs(None, run.config["data"])[: args.limit]
    ids = [pipe.src_vocab.encode(pipe.codec.encode(en, SRC_LANG)) for en, _ in pairs]
    refs = [fr for _, fr in pairs]
    info = machine()
    print(machine_text(info))
    print(f"command: {' '.join(sys.argv)}  ({len(ids)} sentences)")
    # Before any row: the timings of a fresh process are not those of one that is warm.
    compiling = compile_seconds(args.run, args.threads) if "attnkit-compiled" in names else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="attnkit-ct2-") as tmp:
        translators = (ct2_translators(run, Path(tmp), args.threads)
                       if any(n.startswith("ctranslate2") for n in names) else {})
        for beam in beams:
            made: dict[str, Decode | str] = {
                "attnkit": attnkit_engine(run, beam, True),
                "attnkit-uncached": attnkit_engine(run, beam, False)}
            if "attnkit-compiled" in names:
                made["attnkit-compiled"] = attnkit_engine(run, beam, True, compiled=True)
            for q in ("float32", "int8"):
                if f"ctranslate2-{q}" in names:
                    made[f"ctranslate2-{q}"] = (translators if isinstance(translators, str)
                                                else ct2_engine(run, translators[q], beam))
            for batch in batches:
                rows += measure([(n, made[n]) for n in names], beam, batch, ids, refs,
                                args.rounds)
    compare(rows)
    print_table(rows)
    if compiling:
        print(f"compiled decoding: {compiling['cold_s']} s to the first compiled translation "
              f"with an empty cache, {compiling['warm_s']} s with it warm")
    print(json.dumps({"rows": rows, "compile": compiling, "machine": info}))


if __name__ == "__main__":
    main()
