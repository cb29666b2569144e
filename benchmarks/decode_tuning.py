"""What the tuning of attnkit's decoder buys: torch.compile, bf16, int8, against float32 eager
(and what the float32 decoder gained by choosing tokens without a full log-softmax).

Run: ``.venv/bin/python benchmarks/decode_tuning.py RUN [--threads N] [--limit N]
[--rounds N] [--variants float32,full-softmax,compile,bf16,int8] [--batches 32,all]``

``RUN`` is a translate run folder with a Transformer. Each variant decodes the first
``--limit`` sentences of the run's test split with `attnkit.decoding.decode_many` (no attention
asked, as ``eval`` and the server), in calls of 32 sentences and in one call of all of them,
greedy and beam 5, in this process (with the ``attnkit`` command's memory settings,
`attnkit.allocator.reuse_freed_memory`):

* ``float32``: the model as it is (the default);
* ``compile``: ``torch.compile`` of the model's incremental step (``_cached_step``, dynamic
  shapes), compiled before timing (the seconds it took are reported);
* ``bf16``: bf16 autocast around decoding (where the CPU has native bf16: AMX or
  AVX512-BF16; skipped elsewhere, where it is ~40x slower);
* ``int8``: ``torch.ao.quantization.quantize_dynamic`` of every linear layer (int8 weights,
  activations quantized on the fly);
* ``full-softmax``: float32, with each step's choice made as before `attnkit.decoding.choice`:
  ``log_softmax`` over the whole vocabulary, then ``max`` (greedy) or ``topk`` (beam). The
  baseline that choice is measured against, timed in the same run.

The variants of one (beam, batch) pair are timed interleaved, ``--rounds`` times, after a
warm-up each; the median sentences/s is reported with ``vs_float32`` and BLEU (sacrebleu, one
reference per line, no ``<unk>`` replacement) and ``same_as_float32``: the share of sentences
whose output equals float32's. The last line is JSON: ``{"rows": [...], "machine": {...},
"compile_seconds": ...}``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import sacrebleu
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from attnkit.allocator import reuse_freed_memory  # noqa: E402
from attnkit.apps.translate import load_run  # noqa: E402
from attnkit.data.text_codec import SRC_LANG, TGT_LANG  # noqa: E402
from attnkit.data.translation_splits import eval_pairs  # noqa: E402
from attnkit.decoding import beam as beam_module  # noqa: E402
from attnkit.decoding import decode_many, greedy  # noqa: E402
from attnkit.machine import cpu_has_native_bf16, machine_info, machine_line  # noqa: E402
from attnkit.models.config import TransformerConfig  # noqa: E402

VARIANTS = ("float32", "full-softmax", "compile", "bf16", "int8")
BEAMS = (1, 5)


def variant_model(model: torch.nn.Module, name: str) -> torch.nn.Module | str:
    """The model of a variant (a copy when it changes the model), or why it is skipped."""
    if name in ("float32", "full-softmax", "bf16"):
        if name == "bf16" and not cpu_has_native_bf16():
            return "no native bf16 on this CPU"
        return model
    if name == "int8":
        # torch.ao.quantization is deprecated in favour of torchao, and still runs in 2.13: the
        # benchmark measures what it gives without adding a dependency for it.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")
            return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model),
                                                          {torch.nn.Linear}, dtype=torch.qint8)
    compiled = copy.deepcopy(model)
    compiled._cached_step = torch.compile(compiled._cached_step, dynamic=True)
    return compiled


def full_softmax_choice(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`attnkit.decoding.choice.best_tokens` as it was computed before: every log-probability
    written, then searched."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    if k == 1:
        best, token = log_probs.max(dim=-1, keepdim=True)
        return best, token
    best, tokens = log_probs.topk(k, dim=-1)
    return best, tokens


@contextlib.contextmanager
def setting(name: str) -> Iterator[None]:
    """What a variant changes around decoding: bf16 autocast, or the decoders' choice."""
    if name == "bf16":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            yield
    elif name == "full-softmax":
        with contextlib.ExitStack() as stack:
            for decoder_module in (greedy, beam_module):
                stack.enter_context(mock.patch.object(decoder_module, "best_tokens",
                                                      full_softmax_choice))
            yield
    else:
        yield


def decoder(run: Any, model: torch.nn.Module, name: str, beam: int,
            batch: int | str) -> Callable[[Sequence[list[int]]], list[str]]:
    """Source ids -> output texts, in calls of ``batch`` sentences."""
    p = run.pipeline
    skip = {p.tgt_vocab.pad_id, p.tgt_vocab.bos_id, p.tgt_vocab.eos_id}

    def decode(ids: Sequence[list[int]]) -> list[str]:
        size = len(ids) if batch == "all" else int(batch)
        out = []
        with setting(name):
            for at in range(0, len(ids), size):
                out += decode_many(model, ids[at:at + size], beam=beam, need_weights=False)
        return [p.codec.decode([p.tgt_vocab.itos[i] for i in h.tokens if i not in skip],
                               TGT_LANG) for h in out]
    return decode


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--batches", default="32,all", help="sentences per call (default 32,all)")
    args = ap.parse_args(argv)
    names = args.variants.split(",")
    batches = [b if b == "all" else int(b) for b in args.batches.split(",")]
    if set(names) - set(VARIANTS) or "float32" not in names:
        ap.error(f"--variants: float32 and any of {', '.join(VARIANTS[1:])}")
    torch.set_num_threads(args.threads)
    reuse_freed_memory()
    run = load_run(args.run)
    if not isinstance(run.model.config, TransformerConfig):
        ap.error("a Transformer run is needed (the tuning is of its incremental step)")
    p = run.pipeline
    pairs = eval_pairs(None, run.config["data"])[: args.limit]
    ids = [p.src_vocab.encode(p.codec.encode(en, SRC_LANG)) for en, _ in pairs]
    refs = [fr for _, fr in pairs]
    info = machine_info()
    print(f"machine: {machine_line(info)}")
    print(f"command: {' '.join(sys.argv)}  ({len(ids)} sentences)")
    models = {n: variant_model(run.model, n) for n in names}
    compile_seconds = None
    if not isinstance(models.get("compile", ""), str):
        start = time.perf_counter()
        for beam in BEAMS:   # compiles every shape the timed rows meet
            for batch in batches:
                decoder(run, models["compile"], "compile", beam, batch)(ids)
        compile_seconds = round(time.perf_counter() - start, 1)
        print(f"compile (and one pass of every row): {compile_seconds} s")
    rows = []
    for beam in BEAMS:
        for batch in batches:
            rows += measure(run, models, beam, batch, ids, refs, args.rounds)
    print(f"{'variant':<10}{'beam':>5}{'batch':>6}{'sent/s':>9}{'spread':>8}{'x f32':>7}"
          f"{'BLEU':>7}{'same':>7}")
    for r in rows:
        if "skipped" in r:
            print(f"{r['variant']:<10}{r['beam']:>5}{r['batch']:>6}  skipped: {r['skipped']}")
            continue
        print(f"{r['variant']:<10}{r['beam']:>5}{r['batch']:>6}{r['sent_per_s']:>9.1f}"
              f"{r['spread']:>8.2f}{r['vs_float32']:>7.2f}{r['bleu']:>7.2f}"
              f"{r['same_as_float32']:>7.1%}")
    print(json.dumps({"rows": rows, "machine": info, "compile_seconds": compile_seconds}))


def measure(run: Any, models: dict[str, torch.nn.Module | str], beam: int, batch: int | str,
            ids: Sequence[list[int]], refs: Sequence[str], rounds: int) -> list[dict]:
    rows, timed, outputs = [], [], {}
    for name, model in models.items():
        row: dict[str, Any] = {"variant": name, "beam": beam, "batch": batch}
        rows.append(row)
        if isinstance(model, str):
            row["skipped"] = model
            continue
        decode = decoder(run, model, name, beam, batch)
        outputs[name] = decode(ids)   # warm-up, and the outputs compared
        timed.append((row, decode, []))
    for _ in range(rounds):
        for _row, decode, speeds in timed:
            start = time.perf_counter()
            decode(ids)
            speeds.append(len(ids) / (time.perf_counter() - start))
    base = statistics.median(next(s for r, _, s in timed if r["variant"] == "float32"))
    for row, _, speeds in timed:
        name = row["variant"]
        row.update(sent_per_s=round(statistics.median(speeds), 1),
                   spread=round(max(speeds) / min(speeds), 2),
                   vs_float32=round(statistics.median(speeds) / base, 2),
                   bleu=round(sacrebleu.corpus_bleu(outputs[name], [list(refs)]).score, 2),
                   same_as_float32=round(sum(a == b for a, b in zip(
                       outputs[name], outputs["float32"], strict=True)) / len(ids), 4))
    return rows


if __name__ == "__main__":
    main()
