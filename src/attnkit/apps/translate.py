"""English -> French translation: an attention encoder-decoder trained into a run folder.

The app contract (the same four calls in every app; the CLI ``attnkit translate`` only parses
arguments for them):

* :func:`train` ``(data, out, *, resume=False, overwrite=False, **overrides)`` -> the trainer's
  ``TrainResult``. ``overrides`` are fields of :class:`TranslateSettings`. The run folder gets
  ``config.json``, ``vocab_src.json``/``vocab_tgt.json`` (and ``subword.model`` with
  ``subword``), ``metrics.jsonl``, ``train.log``, ``best.safetensors``, ``last/``, then
  ``test_metrics.json``, ``heatmap.png`` and ``report.html``.
* :func:`evaluate` ``(run, data=None, *, beam=1, ...)`` -> sacrebleu corpus BLEU (cased, 13a)
  and chrF of *free-running* decoding; adjacent lines with the same English sentence are the
  references of one source (multi-reference BLEU), ``single_ref`` scores each line alone.
* :func:`predict` ``(run, sentences)`` -> :class:`TranslationPrediction` s, each with its
  attention ``[T_tgt, T_src]`` (and, asked with ``need_weights="all"``, a Transformer's
  ``[layers, heads, T_tgt, T_src]``).
* :func:`load_run` ``(run)`` -> a :class:`~attnkit.apps.runs.Run` (model, pipeline, config).

Decoding goes through :func:`attnkit.decoding.decode_many` (incremental decoding with the
key/value cache, length-grouped batches, batched beam search); attention is kept only when
something uses it (``<unk>`` replacement, figures, pages). ``engine="ctranslate2"`` translates
with a run exported by :func:`attnkit.apps.translate_ct2.export_run` instead (no attention).

``data``: see :mod:`attnkit.data.translation_splits` (``"synthetic"``, ``"tatoeba"``, a folder
with train/valid/test files, or one pairs file split 96/2/2).

Source length cap: a source longer than the model reads is cut to its first
:attr:`TranslatePipeline.max_source` tokens (``truncated`` counts the rest) and never encoded
whole. For a Transformer the cap is its ``max_len`` (the positional table it was built for, 512
by default); an RNN has no positional limit, so its cap is the same 512 tokens
(``RNN_MAX_SOURCE``). The run's ``max_len`` option is *not* the cap: it only filters training
pairs, and test sentences longer than it are still translated (the by-length table shows how
well).

Example::

    train("synthetic", "runs/demo")                 # ~2-3 minutes on 2 CPU cores
    evaluate("runs/demo", beam=5)["bleu"]
    p = predict("runs/demo", ["The cat does not see her."])[0]
    p.text, p.weights.shape                           # "Le chat ne la voit pas .", (7, 7)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from attnkit.apps.metrics import bleu_chrf
from attnkit.apps.prediction import Prediction
from attnkit.apps.runs import (
    FORMAT,
    Run,
    check_new_run,
    check_resumable,
    read_config,
    start_run,
    write_json,
)
from attnkit.apps.translate_metrics import score_translations
from attnkit.apps.translate_report import explorer_page, report_page
from attnkit.apps.translate_settings import (
    OPTION_FIELDS,
    ModelConfig,
    TranslateSettings,
    build_model_config,
    check_device,
    resume_settings,
    settings_from,
)
from attnkit.data.batching import bucket_batch_plan
from attnkit.data.pairs import group_references
from attnkit.data.subword import SubwordModel
from attnkit.data.text_codec import SRC_LANG, TGT_LANG, TextCodec, TokenPair
from attnkit.data.translation import TranslationDataset, collate_translation, filter_by_length
from attnkit.data.translation_splits import Pair, data_spec, eval_pairs, load_splits, spec_name
from attnkit.data.vocab import UNK, Vocab
from attnkit.decoding import Hypothesis, decode_many, replace_unk
from attnkit.errors import CheckpointError, DataError, UsageError
from attnkit.fileio import atomic_write_bytes, atomic_write_text
from attnkit.models import build_model, masked_cross_entropy
from attnkit.models.config import (
    TransformerConfig,
    config_from_dict,
)
from attnkit.training import (
    LossOutput,
    TrainConfig,
    Trainer,
    TrainResult,
    load_weights,
    seed_everything,
)
from attnkit.training.distributed import is_main_process

APP = "translate"
ENGINES = ("attnkit", "ctranslate2")
NO_ATTENTION = ("the CTranslate2 engine computes no attention: --html, --plot and --report "
                "need --engine attnkit (with the training run)")
Log = Callable[[str], None]
VOCAB_FILES = {"src": "vocab_src.json", "tgt": "vocab_tgt.json"}
SUBWORD_FILE = "subword.model"   # the joint sentencepiece model of a --subword run
RNN_MAX_SOURCE = 512


def _quiet(_: str) -> None:
    return None


# ============================================================================ run pipeline

@dataclass
class TranslatePipeline:
    """What turns text into a run's model ids and back.

    Attributes:
        codec: words or the run's joint subword model.
        src_vocab, tgt_vocab: the vocabularies (one joint vocabulary with subwords).
        max_source: the longest source (tokens) the model reads; longer ones are cut (see the
            module docstring).
    """

    codec: TextCodec
    src_vocab: Vocab
    tgt_vocab: Vocab
    max_source: int


def source_limit(config: ModelConfig) -> int:
    """The longest source the model reads: a Transformer's positional table, else 512."""
    return config.max_len if isinstance(config, TransformerConfig) else RNN_MAX_SOURCE


def _vocab_digest(vocab: Vocab) -> str:
    return hashlib.sha256(json.dumps(vocab.itos, ensure_ascii=False).encode()).hexdigest()


def _load_vocabs(run: Path, config: dict[str, Any]) -> tuple[Vocab, Vocab]:
    vocabs = []
    for side in ("src", "tgt"):
        path = run / VOCAB_FILES[side]
        if not path.is_file():
            raise CheckpointError(f"{path}: vocabulary file is missing")
        try:
            vocab = Vocab.from_json(path)
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{path}: not a vocabulary file ({exc})") from None
        want = config.get("vocab", {}).get(side, {})
        size = config["model"][f"{side}_vocab"]
        if len(vocab) != size or want.get("sha256") not in (None, _vocab_digest(vocab)):
            raise CheckpointError(
                f"{path}: this vocabulary ({len(vocab)} tokens) does not match the one the "
                f"run's weights were trained with ({size} tokens, sha256 "
                f"{str(want.get('sha256'))[:12]}...); restore the run's original vocabulary")
        vocabs.append(vocab)
    return vocabs[0], vocabs[1]


def _run_codec(run: Path, config: dict[str, Any]) -> TextCodec:
    """The codec a run was trained with (its ``subword.model`` when it used subwords)."""
    if not config.get("options", {}).get("subword"):
        return TextCodec()
    path = run / SUBWORD_FILE
    if not path.is_file():
        raise CheckpointError(f"{path}: the run's sentencepiece model is missing (it was "
                              "trained with --subword)")
    try:
        return TextCodec(SubwordModel(path))
    except DataError as exc:
        raise CheckpointError(str(exc)) from None


def _run_model_config(run: Path, config: dict[str, Any]) -> ModelConfig:
    missing = [key for key in ("model", "data") if not isinstance(config.get(key), dict)]
    if missing:
        raise CheckpointError(f"{run / 'config.json'}: no {' or '.join(missing)} settings")
    try:
        return config_from_dict(config["model"])
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{run / 'config.json'}: bad model config ({exc})") from None


def _weights_path(run: Path, weights: str) -> Path:
    if weights not in ("best", "last"):
        raise UsageError(f"weights must be 'best' or 'last', got {weights!r}")
    if weights == "best" and (run / "best.safetensors").exists():
        return run / "best.safetensors"
    path = run / "last" / "model.safetensors"
    if not path.exists():
        raise CheckpointError(f"{run}: no weights yet (neither best.safetensors nor "
                              "last/model.safetensors); train the run first")
    return path


def _run_pipeline(run: Path, config: dict[str, Any],
                  model_config: ModelConfig) -> TranslatePipeline:
    src_vocab, tgt_vocab = _load_vocabs(run, config)
    return TranslatePipeline(_run_codec(run, config), src_vocab, tgt_vocab,
                             source_limit(model_config))


def load_run(run: str | os.PathLike, *, device: str = "cpu", weights: str = "best",
             engine: str = "attnkit") -> Run:
    """A trained run: the model (eval mode, ``best`` or ``last`` weights), its pipeline
    (:class:`TranslatePipeline`) and its config.

    With ``engine="ctranslate2"``, ``run`` is a folder written by ``attnkit translate export``
    and the result an :class:`~attnkit.apps.translate_ct2.ExportedRun` (``weights`` is
    ignored: the export holds one set).

    Raises:
        CheckpointError: not a translate run, broken JSON, vocabularies that do not match the
            ones the weights were trained with, a missing or truncated weights file.
        UsageError: an unknown engine; CTranslate2 not installed.
    """
    if engine not in ENGINES:
        raise UsageError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    if engine == "ctranslate2":
        from attnkit.apps.translate_ct2 import load_exported

        return load_exported(run, device=device)
    run = Path(run)
    if (run / "model.bin").is_file():
        raise CheckpointError(f"{run}: an exported CTranslate2 model, not a training run; "
                              "use it with --engine ctranslate2")
    config = read_config(run, APP)
    model_config = _run_model_config(run, config)
    pipeline = _run_pipeline(run, config, model_config)
    model = build_model(model_config)
    load_weights(model, _weights_path(run, weights))
    model.to(check_device(device)).eval()
    return Run(run, APP, model, pipeline, config, str(device))


# ============================================================================ predictions

@dataclass
class TranslationPrediction(Prediction):
    """One translated sentence.

    Attributes:
        source: the input text.
        source_tokens: the tokens the model read (at most ``max_source``; words outside the
            vocabulary were ``<unk>`` to the model).
        tokens: output tokens (``<unk>`` replaced by the most attended source word when asked).
        text: the detokenized translation.
        weights: ``[len(tokens), len(source_tokens)]`` attention (a Transformer's last decoder
            layer, averaged over heads); None for attention='none', the CTranslate2 engine,
            or when not asked.
        score: log-probability of the output.
        unknown: share of the source tokens the vocabulary maps to ``<unk>`` (0..1).
        truncated: source tokens cut off after ``max_source`` (0: read whole).
        layer_weights: a Transformer's cross-attention of every decoder layer and head,
            ``[layers, heads, len(tokens), len(source_tokens)]``, when asked
            (``need_weights="all"``: the explorer page shows it); None otherwise.
    """

    source: str
    source_tokens: list[str]
    tokens: list[str]
    text: str
    weights: np.ndarray | None
    score: float
    unknown: float = 0.0
    truncated: int = 0
    layer_weights: np.ndarray | None = None

    def to_dict(self) -> dict[str, Any]:
        weights = None if self.weights is None else np.round(self.weights, 4).tolist()
        row = {"source": self.source, "text": self.text, "tokens": self.tokens,
               "source_tokens": self.source_tokens, "score": self.score,
               "unknown": round(self.unknown, 4), "truncated": self.truncated,
               "weights": weights}
        if self.layer_weights is not None:
            row["layer_weights"] = np.round(self.layer_weights, 4).tolist()
        return row

    def figure(self):
        """The alignment heatmap (target tokens down, source tokens across)."""
        from attnkit.viz.heatmap import alignment_figure

        if self.weights is None:
            raise UsageError(f"no attention weights for {self.source!r}: the model has none "
                             "(attention='none'), or they were not kept (CTranslate2 engine)")
        if not self.tokens:
            raise UsageError(f"the translation of {self.source!r} is empty: nothing to plot")
        return alignment_figure(self.weights, self.source_tokens, self.tokens,
                                title=self.source)

    @classmethod
    def page(cls, predictions: Sequence[TranslationPrediction],
             summary: dict[str, Any]) -> str:
        """The translation explorer (:func:`attnkit.viz.translation_page`): every layer and
        head when the predictions carry ``layer_weights``, else their ``weights``."""
        return explorer_page(predictions, summary)

    def note(self) -> str | None:
        """One line on what the model could not read, or None when it read everything."""
        parts = []
        if self.unknown:
            parts.append(f"{self.unknown:.0%} of its tokens are unknown to the model")
        if self.truncated:
            parts.append(f"{self.truncated} tokens cut off after the first "
                         f"{len(self.source_tokens)} (the model reads no more)")
        return "; ".join(parts) or None


def encode_source(pipeline: TranslatePipeline, text: str,
                  index: int) -> tuple[list[str], list[int], int]:
    """``text`` as the model reads it: (tokens, their ids, tokens cut after ``max_source``).

    Raises:
        UsageError: a text without any token (``index`` names it).
    """
    tokens, cut = pipeline.codec.encode_capped(text, SRC_LANG, pipeline.max_source)
    if not tokens:
        raise UsageError(f"empty sentence (input {index}): nothing to translate")
    return tokens, pipeline.src_vocab.encode(tokens), cut


def _prediction(pipeline: TranslatePipeline, source: str,
                encoded: tuple[list[str], list[int], int], hyp: Hypothesis,
                unk_replace: bool) -> TranslationPrediction:
    tokens, ids, cut = encoded
    v = pipeline.tgt_vocab
    skip = {v.pad_id, v.bos_id, v.eos_id}
    # Drop stray specials together with their attention rows, so rows stay aligned.
    keep = [k for k, i in enumerate(hyp.tokens) if i not in skip]
    words = [v.itos[hyp.tokens[k]] for k in keep]
    attn, layers = None, None
    if hyp.attention is not None:
        rows = hyp.attention[keep].float()   # [T, S] or [T, layers, heads, S]
        if rows.dim() == 4:
            layers = rows.permute(1, 2, 0, 3).numpy()
            rows = rows[:, -1].mean(dim=1)   # what need_weights=True gives
        attn = rows
    if unk_replace:
        words = replace_unk(words, attn, tokens, unk=UNK)
    unknown = sum(i == pipeline.src_vocab.unk_id for i in ids) / len(ids)
    return TranslationPrediction(source, tokens, words, pipeline.codec.decode(words, TGT_LANG),
                                 None if attn is None else attn.numpy(), float(hyp.score),
                                 unknown, cut, layers)


def translate_sentences(model: nn.Module, pipeline: TranslatePipeline,
                        sentences: Sequence[str], *, beam: int = 1, alpha: float = 0.6,
                        unk_replace: bool = True, batch_size: int | None = None,
                        need_weights: bool | str = True) -> list[TranslationPrediction]:
    """Translate ``sentences`` with a model and its pipeline (:func:`decode_many`: batched by
    length, cached, order kept).

    Args:
        need_weights: keep the attention (``weights``); ``"all"`` also a Transformer's
            ``layer_weights``; False skips it (faster) unless ``unk_replace`` needs it.

    Raises:
        UsageError: an empty sentence, or a beam size below 1.
    """
    if beam < 1:
        raise UsageError(f"--beam must be at least 1, got {beam}")
    if batch_size is not None and batch_size < 1:
        raise UsageError(f"batch size must be at least 1, got {batch_size}")
    if need_weights == "all" and not isinstance(model.config, TransformerConfig):
        need_weights = True   # an RNN has one attention: its [T, S] is the whole story
    encoded = [encode_source(pipeline, s, i) for i, s in enumerate(sentences, 1)]
    hyps = decode_many(model, [ids for _, ids, _ in encoded], beam=beam, alpha=alpha,
                       batch_size=batch_size, need_weights=need_weights or unk_replace)
    return [_prediction(pipeline, s, enc, hyp, unk_replace)
            for s, enc, hyp in zip(sentences, encoded, hyps, strict=True)]


def _loaded(run: str | os.PathLike | Any, device: str, engine: str) -> Any:
    """A :func:`load_run` result for a folder; an already loaded run as it is."""
    if isinstance(run, (str, os.PathLike)):
        return load_run(run, device=device, engine=engine)
    return run


def predict(run: str | os.PathLike | Run, inputs: Sequence[str], *, beam: int = 1,
            alpha: float = 0.6, unk_replace: bool = True, batch_size: int | None = None,
            device: str = "cpu", need_weights: bool | str | None = None,
            engine: str = "attnkit") -> list[TranslationPrediction]:
    """Translate ``inputs`` with a run folder (or a :func:`load_run` result).

    Args:
        beam, alpha: beam size (1 = greedy) and length penalty (attnkit: GNMT; CTranslate2:
            ``length ** alpha``).
        unk_replace: replace an output ``<unk>`` by the most attended source token (the
            CTranslate2 engine has no attention: ``<unk>`` stays).
        batch_size: at most this many sentences per batch; None: the engine's default
            (attnkit batches by tokens, :data:`attnkit.decoding.batched.DECODE_MAX_TOKENS`;
            CTranslate2 by sentences, :data:`attnkit.serving.ctranslate2.BATCH_SIZE`).
        need_weights: keep the attention (None: the engine's default, True for attnkit);
            ``"all"`` also a Transformer's ``layer_weights`` (the explorer page); False is
            faster. The CTranslate2 engine refuses True and ``"all"``.
        engine: ``"attnkit"``, or ``"ctranslate2"`` with ``run`` an exported folder
            (``attnkit translate export``).

    Raises:
        UsageError: no input, or an empty one; attention asked from CTranslate2.
    """
    if not inputs:
        raise UsageError("no sentence given: nothing to translate")
    if need_weights and engine == "ctranslate2":
        raise UsageError(NO_ATTENTION)
    loaded = _loaded(run, device, engine)
    if not isinstance(loaded, Run):
        from attnkit.apps.translate_ct2 import translate_exported

        return translate_exported(loaded, inputs, beam=beam, alpha=alpha,
                                  batch_size=batch_size, need_weights=need_weights)
    return translate_sentences(loaded.model, loaded.pipeline, inputs, beam=beam, alpha=alpha,
                               unk_replace=unk_replace, batch_size=batch_size,
                               need_weights=True if need_weights is None else need_weights)


# ============================================================================ metrics

def score_pairs(translate: Callable[[Sequence[str]], list[TranslationPrediction]],
                pairs: Sequence[Pair], *, beam: int, alpha: float, engine: str,
                max_source: int,
                ) -> tuple[dict[str, Any], list[TranslationPrediction], list[list[str]]]:
    """Metrics, predictions and references of ``pairs`` (each distinct source decoded once,
    by ``translate``: sentences -> predictions)."""
    groups = group_references(list(pairs))
    if not groups:
        raise DataError("nothing to evaluate: no sentence pairs")
    sources, refs = [en for en, _ in groups], [r for _, r in groups]
    start = time.perf_counter()
    preds = translate(sources)
    seconds = time.perf_counter() - start
    metrics = score_translations([p.text for p in preds], sources, refs)
    metrics.update({"sentences": len(groups), "references": sum(len(r) for r in refs),
                    "beam": beam, "alpha": alpha if beam > 1 else None,
                    "decode_seconds": round(seconds, 2),
                    "sentences_per_s": round(len(groups) / max(seconds, 1e-9), 1),
                    "engine": engine, "max_source_tokens": max_source,
                    "truncated": sum(1 for p in preds if p.truncated),
                    "unknown": round(sum(p.unknown for p in preds) / len(preds), 4)})
    return metrics, preds, refs


def _score_run(run: Run, pairs: Sequence[Pair], *, beam: int = 1, alpha: float = 0.6,
               unk_replace: bool = True, batch_size: int | None = None,
               ) -> tuple[dict[str, Any], list[TranslationPrediction], list[list[str]]]:
    """:func:`score_pairs` with the attnkit engine (attention kept only for ``<unk>``)."""
    translate = functools.partial(translate_sentences, run.model, run.pipeline, beam=beam,
                                  alpha=alpha, unk_replace=unk_replace, batch_size=batch_size,
                                  need_weights=False)
    return score_pairs(translate, pairs, beam=beam, alpha=alpha, engine="attnkit",
                       max_source=run.pipeline.max_source)


def has_attention(model: nn.Module) -> bool:
    """False for the fixed-length-context baseline (``attention='none'``)."""
    return getattr(model.config, "attention", None) != "none"


def _report_page(run: Run, metrics: dict[str, Any],
                 predictions: Sequence[TranslationPrediction],
                 references: Sequence[Sequence[str]], *, beam: int = 1, alpha: float = 0.6,
                 unk_replace: bool = True) -> str:
    """The explorer page of a scored run: ``predictions`` (a few) decoded again with every
    decoder layer's and head's attention, with their references and the run's metrics."""
    shown = translate_sentences(run.model, run.pipeline, [p.source for p in predictions],
                                beam=beam, alpha=alpha, unk_replace=unk_replace,
                                need_weights="all")
    return report_page(metrics, shown, references, run.summary())


def evaluate(run: str | os.PathLike | Run, data: str | None = None, *, beam: int = 1,
             alpha: float = 0.6, unk_replace: bool = True, batch_size: int | None = None,
             report: str | os.PathLike | None = None, examples: int = 10,
             device: str = "cpu", strict: bool = False, log: Log = _quiet,
             engine: str = "attnkit") -> dict[str, Any]:
    """BLEU/chrF of a run on ``data`` (None = the run's own test split).

    Args:
        run: a run folder or a :func:`load_run` result.
        data: see :func:`~attnkit.data.translation_splits.eval_pairs`.
        beam, alpha, unk_replace, batch_size: decoding (see :func:`predict`).
        report: also write the explorer page with the first ``examples`` translations, their
            references and attention (decoded again with every layer's and head's weights).
        strict: a malformed data line is an error; log: where notes on skipped lines go.
        engine: ``"attnkit"``, or ``"ctranslate2"`` with ``run`` an exported folder (no
            attention: no ``report``, no ``<unk>`` replacement).

    Returns:
        ``{"bleu", "chrf", "counts", "signature", "by_length", "single_ref", "sentences",
        "references", "beam", "alpha", "decode_seconds", "sentences_per_s", "engine",
        "max_source_tokens", "truncated", "unknown"}``; ``truncated`` counts the sources cut
        to ``max_source_tokens``, ``unknown`` is the mean share of source tokens outside the
        vocabulary; ``sentences_per_s`` times the decoding alone.

    Raises:
        UsageError: ``report`` for a model without attention or the CTranslate2 engine.
    """
    if report is not None and engine == "ctranslate2":
        raise UsageError(NO_ATTENTION)
    loaded = _loaded(run, device, engine)
    if not isinstance(loaded, Run):
        from attnkit.apps.translate_ct2 import evaluate_exported

        if report is not None:
            raise UsageError(NO_ATTENTION)
        return evaluate_exported(loaded, data, beam=beam, alpha=alpha, batch_size=batch_size,
                                 strict=strict, log=log)
    if report is not None and not has_attention(loaded.model):
        raise UsageError("--report shows attention, and this model has none (attention='none')")
    pairs = eval_pairs(data, loaded.config["data"], strict=strict, log=log)
    metrics, preds, refs = _score_run(loaded, pairs, beam=beam, alpha=alpha,
                                      unk_replace=unk_replace, batch_size=batch_size)
    if report is not None:
        atomic_write_text(report, _report_page(loaded, metrics, preds[:examples],
                                               refs[:examples], beam=beam, alpha=alpha,
                                               unk_replace=unk_replace))
    return metrics


# ============================================================================ reports

def most_reordered(predictions: Sequence[TranslationPrediction]) -> TranslationPrediction:
    """The prediction whose attention crosses most (inversions of the per-row argmax): the
    heatmap that shows re-ordering, rather than a plain diagonal."""
    def crossings(p: TranslationPrediction) -> int:
        peaks = p.weights.argmax(axis=1).tolist() if p.weights is not None else []
        return sum(a > b for i, a in enumerate(peaks) for b in peaks[i + 1:])
    return max(predictions, key=crossings)


# ============================================================================ training

@dataclass
class _Prepared:
    """Everything a training needs, computed (and validated) before anything is written."""

    settings: TranslateSettings
    splits: dict[str, list[Pair]]
    pipeline: TranslatePipeline
    train_tokens: list[TokenPair]
    model_config: ModelConfig
    train_config: TrainConfig
    metadata: dict[str, Any]          # config.json without "train" (the trainer adds it)
    subword_bytes: bytes | None = None


def _subword_codec(s: TranslateSettings, splits: dict[str, list[Pair]], out: Path,
                   log: Log) -> tuple[TextCodec, bytes | None]:
    """The codec of a fresh run, and the subword model's bytes to save in the run."""
    if not s.subword:
        return TextCodec(), None
    if not is_main_process():   # rank 0 trains the model; the other ranks read its file
        return TextCodec(SubwordModel(_wait_for(out / SUBWORD_FILE))), None
    log(f"training a joint sentencepiece model ({s.subword} pieces)")
    texts = [text for pair in splits["train"] for text in pair]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            model = SubwordModel.train(texts, Path(tmp) / SUBWORD_FILE, vocab_size=s.subword)
        except ValueError as exc:
            raise UsageError(f"--subword {s.subword}: {exc}") from None
        return TextCodec(model), (Path(tmp) / SUBWORD_FILE).read_bytes()


def _wait_for(path: Path, timeout: float = 600.0) -> Path:
    """Block until rank 0 has written ``path`` in this training (multi-process runs share the
    run folder); a file older than this process is a previous run's and does not count."""
    started = time.time() - 10.0
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.stat().st_mtime >= started):
        if time.monotonic() > deadline:
            raise CheckpointError(f"{path}: not written by rank 0 within {timeout:.0f} s")
        time.sleep(0.5)
    return path


def _build_vocabs(s: TranslateSettings, tokens: list[TokenPair]) -> tuple[Vocab, Vocab]:
    if s.subword:   # one joint vocabulary: pieces are shared between the two languages
        joint = Vocab.build([side for pair in tokens for side in pair], min_freq=s.min_freq,
                            max_size=s.max_vocab)
        return joint, joint
    return (Vocab.build([src for src, _ in tokens], min_freq=s.min_freq, max_size=s.max_vocab),
            Vocab.build([tgt for _, tgt in tokens], min_freq=s.min_freq, max_size=s.max_vocab))


def _metadata(s: TranslateSettings, spec: dict[str, Any], pipeline: TranslatePipeline,
              model_config: ModelConfig) -> dict[str, Any]:
    vocabs = {"src": pipeline.src_vocab, "tgt": pipeline.tgt_vocab}
    return {"app": APP, "format": FORMAT, "data": spec, "model": model_config.to_dict(),
            "vocab": {side: {"file": VOCAB_FILES[side], "size": len(v),
                             "sha256": _vocab_digest(v)} for side, v in vocabs.items()},
            "options": {name: getattr(s, name) for name in OPTION_FIELDS}}


def _prepare_fresh(data: str | None, out: Path, s: TranslateSettings, log: Log) -> _Prepared:
    check_device(s.device)
    spec = data_spec(data or "synthetic", s.seed, s.train_size)
    splits = load_splits(spec, progress=s.progress, strict=s.strict, log=log)
    codec, subword_bytes = _subword_codec(s, splits, out, log)
    tokens, drops = filter_by_length(codec.encode_pairs(splits["train"]), s.max_len)
    if not tokens:
        raise DataError(f"no training pairs left after the length filter (--max-len "
                        f"{s.max_len})", path=spec_name(spec))
    src_vocab, tgt_vocab = _build_vocabs(s, tokens)
    model_config = build_model_config(s, src_vocab, tgt_vocab)
    pipeline = TranslatePipeline(codec, src_vocab, tgt_vocab, source_limit(model_config))
    if drops.total:
        log(drops.format("the training split"))
    log(f"data: {len(tokens)} training pairs, {len(splits['valid'])} valid, "
        f"{len(splits['test'])} test; vocabulary {len(src_vocab)} en / {len(tgt_vocab)} fr")
    try:
        train_config = s.train_config()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return _Prepared(s, splits, pipeline, tokens, model_config, train_config,
                     _metadata(s, spec, pipeline, model_config), subword_bytes)


def _prepare_resume(data: str | None, out: Path, overrides: dict[str, Any],
                    log: Log) -> _Prepared:
    config = check_resumable(out, APP)
    s = resume_settings(config, data, overrides)
    check_device(s.device)
    model_config = _run_model_config(out, config)
    pipeline = _run_pipeline(out, config, model_config)
    splits = load_splits(config["data"], progress=s.progress, strict=s.strict, log=log)
    tokens, _ = filter_by_length(pipeline.codec.encode_pairs(splits["train"]), s.max_len)
    train_config = dataclasses.replace(
        TrainConfig.from_dict(config["train"]), epochs=s.epochs, max_minutes=s.max_minutes,
        device=s.device, progress=s.progress)
    metadata = {**{k: v for k, v in config.items() if k != "train"}, "format": FORMAT,
                "options": {name: getattr(s, name) for name in OPTION_FIELDS}}
    log(f"resuming {out} (epochs {s.epochs}, budget "
        f"{'none' if s.max_minutes is None else f'{s.max_minutes:g} min'})")
    return _Prepared(s, splits, pipeline, tokens, model_config, train_config, metadata)


def _claim(out: Path, *, resume: bool, overwrite: bool):
    """The run folder, validated and locked by rank 0 (the other ranks only read it)."""
    if not is_main_process():
        return contextlib.nullcontext(out)
    return start_run(out, app=APP, resume=resume, overwrite=overwrite)


def _write_pipeline(out: Path, prep: _Prepared) -> None:
    if not is_main_process():
        return
    if prep.subword_bytes is not None:
        atomic_write_bytes(out / SUBWORD_FILE, prep.subword_bytes)
    prep.pipeline.src_vocab.to_json(out / VOCAB_FILES["src"])
    prep.pipeline.tgt_vocab.to_json(out / VOCAB_FILES["tgt"])


def _loss_fn(label_smoothing: float, pad_id: int) -> Callable:
    def loss_fn(model: nn.Module, batch: dict[str, torch.Tensor]) -> LossOutput:
        logits = model(batch["src"], batch["src_lengths"], batch["tgt_in"])
        loss, count = masked_cross_entropy(logits, batch["tgt_out"], pad_id=pad_id,
                                           label_smoothing=label_smoothing)
        return LossOutput(loss, count)
    return loss_fn


def _valid_fn(pipeline: TranslatePipeline, pairs: Sequence[Pair]) -> Callable:
    """Greedy BLEU on ``pairs`` (grouped references): the trainer's selection metric."""
    groups = group_references(list(pairs))

    def evaluate_fn(model: nn.Module) -> dict[str, float]:
        preds = translate_sentences(model, pipeline, [en for en, _ in groups])
        return {"bleu": bleu_chrf([p.text for p in preds], [r for _, r in groups])["bleu"]}
    return evaluate_fn


def _fit(out: Path, prep: _Prepared, resume: bool, log: Log) -> TrainResult:
    """Seed, build the model, train (or continue ``last/``)."""
    s, pipeline, config = prep.settings, prep.pipeline, prep.model_config
    seed_everything(s.seed)   # before building: the seed fixes the initial weights
    net = build_model(config)
    log(f"model: {config.arch} {sum(p.numel() for p in net.parameters()) / 1e6:.2f}M "
        "parameters " + (f"({config.cell}, {config.attention} attention, {config.style} style)"
                         if config.arch == "rnn" else f"(d_model {config.d_model})"))
    dataset = TranslationDataset.from_token_pairs(prep.train_tokens, pipeline.src_vocab,
                                                  pipeline.tgt_vocab)
    valid = prep.splits["valid"][:s.valid_sample]
    trainer = Trainer(
        net, prep.train_config, out, train_dataset=dataset,
        collate_fn=functools.partial(collate_translation, pad_id=config.pad_id,
                                     bos_id=config.bos_id, eos_id=config.eos_id),
        loss_fn=_loss_fn(s.label_smoothing, config.pad_id),
        evaluate_fn=_valid_fn(pipeline, valid),
        batch_plan=bucket_batch_plan(dataset.lengths(), prep.train_config.batch_size,
                                     max_tokens=s.batch_tokens),
        run_metadata=prep.metadata)
    result = trainer.fit(resume=resume)
    log(f"training stopped ({result.stop_reason}) after {result.global_step} steps, "
        f"{result.elapsed:.0f} s; best validation BLEU {result.best_metric}")
    return result


def _finish(out: Path, prep: _Prepared, result: TrainResult, log: Log) -> dict[str, Any]:
    """Score the best weights on the test split; write test_metrics.json, heatmap, report."""
    run = load_run(out, device=prep.settings.device)
    metrics, preds, refs = _score_run(run, prep.splits["test"])
    metrics.update({"stop_reason": result.stop_reason, "train_seconds": round(result.elapsed, 1),
                    "best_valid_bleu": result.best_metric, "run": str(out)})
    write_json(out / "test_metrics.json", metrics)
    log(f"test: BLEU {metrics['bleu']:.2f}  chrF {metrics['chrf']:.2f}  "
        f"({metrics['sentences']} sentences, greedy)")
    n = prep.settings.examples
    for p, r in list(zip(preds, refs, strict=True))[:n]:
        log(f"  EN  {p.source}\n  OUT {p.text}\n  REF {r[0]}")
    if not has_attention(run.model):
        log("no heatmap or report.html: this model has no attention (attention='none')")
        return metrics
    plottable = [p for p in preds[:100] if p.weights is not None and p.tokens]
    if plottable:
        shown = most_reordered(plottable)
        shown.render(out / "heatmap.png")
        log(f"heatmap: {out / 'heatmap.png'} ({shown.source!r} -> {shown.text!r})")
    if not any(p.tokens for p in preds[:n]):
        log(f"no report.html: no example to show (--examples {n}, or empty translations)")
        return metrics
    atomic_write_text(out / "report.html", _report_page(run, metrics, preds[:n], refs[:n]))
    log(f"report: {out / 'report.html'}")
    return metrics


def train(data: str | None = None, out: str | os.PathLike = "runs/demo", *,
          resume: bool = False, overwrite: bool = False, log: Log = print,
          **overrides: Any) -> TrainResult:
    """Train a translation model into the run folder ``out``, then score its test split.

    Args:
        data: ``"synthetic"`` (None: the default), ``"tatoeba"``, a pairs file or a
            train/valid/test folder; with ``resume`` None = the run's (another one is refused).
        out: the run folder.
        resume: continue the interrupted run in ``out`` with its stored settings; given
            ``epochs``/``max_minutes`` (and ``device``, ``progress``, ``examples``,
            ``strict``) apply, any other setting that differs is refused.
        overwrite: replace the run already in ``out``.
        log: where progress lines go.
        **overrides: :class:`TranslateSettings` fields.

    Returns:
        The trainer's ``TrainResult``; a run stopped by a signal returns at once (its
        ``stop_reason`` is ``"signal"``: no test evaluation, resume it later). The test
        metrics are in ``out/test_metrics.json``.

    Raises:
        UsageError: an unknown setting, a bad value, a resume that would change the run.
        CheckpointError: ``out`` holds a run (without overwrite/resume), or is locked.
        DataError: unreadable data.
    """
    out = Path(out)
    log = log if is_main_process() else _quiet
    if resume and overwrite:
        raise UsageError("--resume and --overwrite contradict each other; give one")
    if resume:
        prep = _prepare_resume(data, out, overrides, log)
    else:
        settings = settings_from(overrides)
        if is_main_process():
            check_new_run(out, overwrite=overwrite)
        prep = _prepare_fresh(data, out, settings, log)
    with _claim(out, resume=resume, overwrite=overwrite):
        if not resume:
            _write_pipeline(out, prep)
        result = _fit(out, prep, resume, log)
        if result.stop_reason != "signal" and is_main_process():
            _finish(out, prep, result, log)
    return result
