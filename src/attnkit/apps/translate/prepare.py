"""From a data argument to what a translation training needs: `prepare` reads the data and
builds the pipeline in memory, `reload` rebuilds it from the run's files (a resume, the other
ranks), `load` gives the trained run.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from attnkit.alignment.aligner import eflomal_labels, piece_links
from attnkit.apps.results import Log, Prepared, RunSettings
from attnkit.apps.run_files import CONFIG_FILE, FORMAT, read_config, read_run, run_file
from attnkit.apps.translate import ct2
from attnkit.apps.translate.engines import AttnkitEngine, TranslateLoaded, summary_of
from attnkit.apps.translate.pipeline import (
    APP,
    SUBWORD_FILE,
    VOCAB_FILES,
    WORDS_FILE,
    TranslatePipeline,
    run_model_config,
    run_pipeline,
    source_limit,
    training_words,
    vocab_digest,
)
from attnkit.apps.translate.settings import (
    OPTION_FIELDS,
    ModelConfig,
    TranslateSettings,
    build_model_config,
)
from attnkit.data.subword import SubwordModel
from attnkit.data.text_codec import TextCodec, TokenPair
from attnkit.data.translation import kept_by_length
from attnkit.data.translation_splits import Pair, load_splits, spec_name
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, DataError, UsageError
from attnkit.models import build_model

SMALL_VALID = 100   # validation sentences below which the selection BLEU is noisy (a note)
# An --align-loss run's labels: eflomal has no seed, so a resume must read them, not refit.
LINKS_FILE = "align_links.safetensors"
MAX_LINKS_BYTES = 1 << 30   # Tatoeba's 160,916 pairs: 14 MB


@dataclass
class TranslatePrepared(Prepared):
    """Everything a translation training needs."""

    splits: dict[str, list[Pair]] = dataclasses.field(default_factory=dict)
    pipeline: TranslatePipeline | None = None
    train_tokens: list[TokenPair] = dataclasses.field(default_factory=list)
    # Per training pair its (target piece, source piece) links, with --align-loss.
    train_links: list[list[tuple[int, int]]] | None = None
    model_config: ModelConfig | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)


def _subword_codec(s: TranslateSettings, splits: dict[str, list[Pair]],
                   log: Log) -> tuple[TextCodec, dict[str, bytes]]:
    """The codec of a fresh run, and the subword model's file to save in the run."""
    if not s.subword:
        return TextCodec(), {}
    log(f"training a joint sentencepiece model ({s.subword} pieces)")
    texts = [text for pair in splits["train"] for text in pair]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            model = SubwordModel.train(texts, Path(tmp) / SUBWORD_FILE, vocab_size=s.subword)
        except ValueError as exc:
            raise UsageError(f"--subword {s.subword}: {exc}") from None
        return TextCodec(model), {SUBWORD_FILE: (Path(tmp) / SUBWORD_FILE).read_bytes()}


def _build_vocabs(s: TranslateSettings, tokens: list[TokenPair]) -> tuple[Vocab, Vocab]:
    if s.subword:   # one joint vocabulary: pieces are shared between the two languages
        joint = Vocab.build([side for pair in tokens for side in pair], min_freq=s.min_freq,
                            max_size=s.max_vocab)
        return joint, joint
    return (Vocab.build([src for src, _ in tokens], min_freq=s.min_freq, max_size=s.max_vocab),
            Vocab.build([tgt for _, tgt in tokens], min_freq=s.min_freq, max_size=s.max_vocab))


def prepare(config: RunSettings[TranslateSettings], log: Log) -> TranslatePrepared:
    """Read the data, train the subword model (``--subword``), build the vocabularies and the
    model config of a new run; nothing is written."""
    s, spec = config.settings, config.spec
    splits = load_splits(spec, progress=s.progress, strict=s.strict, log=log)
    codec, files = _subword_codec(s, splits, log)
    encoded = codec.encode_pairs(splits["train"])
    kept, drops = kept_by_length(encoded, s.max_len)
    tokens = [encoded[k] for k in kept]
    if not tokens:
        raise DataError(f"no training pairs left after the length filter (--max-len "
                        f"{s.max_len})", path=spec_name(spec))
    if drops.total:
        log(drops.format("the training split"))
    src_vocab, tgt_vocab = _build_vocabs(s, tokens)
    model_config = build_model_config(s, src_vocab, tgt_vocab)
    # A subword model reads any word: the training words say which ones it never saw.
    known = training_words(en for en, _ in splits["train"]) if s.subword else None
    if known is not None:
        files[WORDS_FILE] = known
    pipeline = TranslatePipeline(codec, src_vocab, tgt_vocab, source_limit(model_config), known)
    links = None
    if s.align_loss:
        links = _training_links(pipeline, [splits["train"][k] for k in kept], tokens, log)
        files[LINKS_FILE] = _links_bytes(links)
    log(f"data: {len(tokens)} training pairs, {len(splits['valid'])} valid, "
        f"{len(splits['test'])} test; vocabulary {len(src_vocab)} en / {len(tgt_vocab)} fr")
    valid = min(len(splits["valid"]), s.valid_sample or len(splits["valid"]))
    if valid < SMALL_VALID:
        log(f"note: validation decodes only {valid} sentences: their BLEU, which picks the best "
            "weights and stops training early, is noisy (--patience 0 trains every --epochs)")
    metadata = {"app": APP, "format": FORMAT, "data": spec, "model": model_config.to_dict(),
                "vocab": {side: {"file": VOCAB_FILES[side], "size": len(v),
                                 "sha256": vocab_digest(v)}
                          for side, v in (("src", src_vocab), ("tgt", tgt_vocab))},
                "options": {name: getattr(s, name) for name in OPTION_FIELDS}}
    # config.json last (without "train": the trainer adds it): it marks the folder as a run.
    files = {**files, VOCAB_FILES["src"]: src_vocab, VOCAB_FILES["tgt"]: tgt_vocab,
             "config.json": metadata}
    return TranslatePrepared(config, config.train, files, splits=splits, pipeline=pipeline,
                             train_tokens=tokens, train_links=links, model_config=model_config,
                             metadata=metadata)


def _training_links(pipeline: TranslatePipeline, pairs: list[Pair], tokens: list[TokenPair],
                    log: Log) -> list[list[tuple[int, int]]]:
    """eflomal's links of the raw training ``pairs`` as piece links of their ``tokens``; a pair
    the aligner reads as other pieces than training does gets none (counted)."""
    start = time.monotonic()
    log(f"alignment labels: eflomal on {len(pairs):,} training pairs")
    pieces, links = eflomal_labels(pipeline, pairs)
    out, unlike = [], 0
    for pair, found, (src, tgt) in zip(pieces, links, tokens, strict=True):
        same = (pair.src_ids == pipeline.src_vocab.encode(src)
                and pair.tgt_ids == pipeline.tgt_vocab.encode(tgt))
        unlike += not same
        out.append(piece_links(pair, found) if same else [])
    log(f"alignment labels: {sum(map(len, out)):,} piece links in "
        f"{time.monotonic() - start:.0f} s" + (f"; {unlike:,} pairs without labels (the aligner "
                                                "split them otherwise)" if unlike else ""))
    return out


def _links_bytes(links: list[list[tuple[int, int]]]) -> bytes:
    """Links per pair as two tensors: ``offsets [pairs + 1]`` into ``links [total, 2]``."""
    lengths = torch.tensor([len(x) for x in links], dtype=torch.int64)
    flat = torch.tensor([p for x in links for p in x], dtype=torch.int32).reshape(-1, 2)
    return save_safetensors({"offsets": torch.cat([lengths.new_zeros(1), lengths.cumsum(0)]),
                             "links": flat})


def _read_links(out: Path, pairs: int) -> list[list[tuple[int, int]]]:
    """`_links_bytes`' file in the run ``out``, for its ``pairs`` training pairs."""
    path = run_file(out, LINKS_FILE, "the alignment labels", limit=MAX_LINKS_BYTES)
    try:
        tensors = load_safetensors(path.read_bytes())
        offsets, flat = tensors["offsets"].tolist(), tensors["links"].tolist()
    except (SafetensorError, KeyError) as exc:
        raise CheckpointError(f"{path}: unreadable alignment labels ({exc})") from None
    if len(offsets) != pairs + 1 or offsets[-1] != len(flat):
        raise CheckpointError(f"{path}: labels of {len(offsets) - 1} pairs, the run has {pairs}")
    return [[tuple(p) for p in flat[a:b]] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def reload(config: RunSettings[TranslateSettings], out: Path, log: Log) -> TranslatePrepared:
    """The prepared data of the run in ``out`` (its pipeline files and its data)."""
    s = config.settings
    stored = config.stored or read_config(out, APP)
    model_config = run_model_config(out, stored)
    pipeline = run_pipeline(out, stored, model_config)
    splits = load_splits(stored["data"], progress=s.progress, strict=s.strict, log=log)
    encoded = pipeline.codec.encode_pairs(splits["train"])
    tokens = [encoded[k] for k in kept_by_length(encoded, s.max_len)[0]]
    metadata = {**{k: v for k, v in stored.items() if k not in ("train", "runtime")},
                "format": FORMAT, "options": {name: getattr(s, name) for name in OPTION_FIELDS}}
    if config.stored is not None:
        log(f"resuming {out} (epochs {s.epochs}, budget "
            f"{'none' if s.max_minutes is None else f'{s.max_minutes:g} min'})")
    links = _read_links(out, len(tokens)) if s.align_loss else None
    return TranslatePrepared(config, config.train, splits=splits, pipeline=pipeline,
                             train_tokens=tokens, train_links=links, model_config=model_config,
                             metadata=metadata)


def load(run: str | os.PathLike, *, weights: str = "best", device: str | None = None,
         engine: str | None = None, compile: str = "auto") -> TranslateLoaded:
    """A trained run with attnkit's engine (``compile``: `engines.COMPILE_MODES`), or with
    ``engine="ctranslate2"`` an `export_run` folder (`ct2.load_exported`). CheckpointError: not
    a translate run, broken files, vocabularies not the weights', missing or cut weights.
    UsageError: an unknown engine; CTranslate2 not installed.
    """
    if engine not in (None, "attnkit", "ctranslate2"):
        raise UsageError(f"engine must be one of attnkit, ctranslate2; got {engine!r}")
    if engine == "ctranslate2":
        return ct2.load_exported(run, device=device or "cpu")
    run = Path(run)
    if (run / "model.bin").is_file():
        raise CheckpointError(f"{run}: an exported CTranslate2 model, not a training run; "
                              "use it with --engine ctranslate2")
    loaded = read_run(TranslateLoaded, run, APP, model_config=run_model_config,
                      pipeline=run_pipeline, build=build_model, describe=summary_of,
                      model_file=CONFIG_FILE, weights=weights, device=device)
    loaded.engine = AttnkitEngine(loaded.model, loaded.pipeline, compile=compile)
    return loaded
