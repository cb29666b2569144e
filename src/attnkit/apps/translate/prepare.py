"""From a data argument to what a translation training needs: `prepare` reads the data and
builds the pipeline in memory, `reload` rebuilds it from the run's files (a resume, the other
ranks), `load` gives the trained run.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnkit.apps.results import Log, Prepared, RunSettings
from attnkit.apps.run_files import CONFIG_FILE, FORMAT, read_config, read_run
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
from attnkit.data.translation import filter_by_length
from attnkit.data.translation_splits import Pair, load_splits, spec_name
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, DataError, UsageError
from attnkit.models import build_model

SMALL_VALID = 100   # validation sentences below which the selection BLEU is noisy (a note)


@dataclass
class TranslatePrepared(Prepared):
    """Everything a translation training needs."""

    splits: dict[str, list[Pair]] = dataclasses.field(default_factory=dict)
    pipeline: TranslatePipeline | None = None
    train_tokens: list[TokenPair] = dataclasses.field(default_factory=list)
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
    tokens, drops = filter_by_length(codec.encode_pairs(splits["train"]), s.max_len)
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
                             train_tokens=tokens, model_config=model_config, metadata=metadata)


def reload(config: RunSettings[TranslateSettings], out: Path, log: Log) -> TranslatePrepared:
    """The prepared data of the run in ``out`` (its pipeline files and its data)."""
    s = config.settings
    stored = config.stored or read_config(out, APP)
    model_config = run_model_config(out, stored)
    pipeline = run_pipeline(out, stored, model_config)
    splits = load_splits(stored["data"], progress=s.progress, strict=s.strict, log=log)
    tokens, _ = filter_by_length(pipeline.codec.encode_pairs(splits["train"]), s.max_len)
    metadata = {**{k: v for k, v in stored.items() if k not in ("train", "runtime")},
                "format": FORMAT, "options": {name: getattr(s, name) for name in OPTION_FIELDS}}
    if config.stored is not None:
        log(f"resuming {out} (epochs {s.epochs}, budget "
            f"{'none' if s.max_minutes is None else f'{s.max_minutes:g} min'})")
    return TranslatePrepared(config, config.train, splits=splits, pipeline=pipeline,
                             train_tokens=tokens, model_config=model_config, metadata=metadata)


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
