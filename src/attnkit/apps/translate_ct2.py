"""The translate app on CTranslate2: export a Transformer run, translate with the export.

``attnkit translate export RUN OUT`` (:func:`export_run`) writes a folder that is usable on its
own (no attnkit weights or vocabulary files needed):

* ``model.bin``, ``config.json`` and the vocabulary files CTranslate2 writes: the CTranslate2
  model (:func:`attnkit.serving.ctranslate2.export_ctranslate2`, whose docstring says what it
  supports);
* ``subword.model``: the run's joint sentencepiece model (text <-> pieces);
* ``vocab_src.json``, ``vocab_tgt.json``: the run's vocabularies (the share of unknown source
  pieces);
* ``attnkit.json``: the rest the app needs: the longest source the model reads, the run's data
  and model settings (``eval`` without ``--data`` scores the run's test split), the
  quantization, the run it came from.

``--engine ctranslate2 --run OUT`` (:func:`load_exported`, :func:`translate_exported`,
:func:`evaluate_exported`) translates with it: sources are cut to the same length as with
attnkit, greedy outputs are attnkit's (float32); beams are normalised by ``length ** alpha``
(CTranslate2's rule) rather than the GNMT penalty. The engine computes no attention:
predictions have ``weights`` None and an output ``<unk>`` stays.

Refused, each with one error line: an RNN run (CTranslate2 runs Transformers only), a run
trained on words (the export tokenizes with the run's sentencepiece model, so that
sentencepiece and ctranslate2 alone can use it: train with ``--subword N``), a non-empty OUT.

Example::

    export_run("runs/fr", "runs/fr-ct2", quantization="int8")
    predict("runs/fr-ct2", ["I am cold."], engine="ctranslate2")[0].text
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attnkit.apps.runs import FORMAT, read_json, write_json
from attnkit.apps.translate import (
    APP,
    NO_ATTENTION,
    SUBWORD_FILE,
    VOCAB_FILES,
    Log,
    TranslatePipeline,
    TranslationPrediction,
    _quiet,
    encode_source,
    load_run,
    score_pairs,
)
from attnkit.data.subword import SubwordModel
from attnkit.data.text_codec import TGT_LANG, TextCodec
from attnkit.data.translation_splits import eval_pairs
from attnkit.data.vocab import Vocab
from attnkit.errors import CheckpointError, DataError, UsageError
from attnkit.models.config import TransformerConfig

EXPORT_FILE = "attnkit.json"
ENGINE = "ctranslate2"
DEVICES = ("cpu", "cuda", "auto")


@dataclass
class ExportedRun:
    """An exported run, loaded: what ``load_run(..., engine="ctranslate2")`` returns.

    Attributes:
        path: the exported folder.
        translator: the ``ctranslate2.Translator``.
        pipeline: text <-> tokens (the run's sentencepiece model, its vocabularies, the
            source cap).
        config: ``attnkit.json``.
        device: where CTranslate2 runs.
    """

    path: Path
    translator: Any
    pipeline: TranslatePipeline
    config: dict[str, Any]
    device: str = "cpu"

    def summary(self) -> dict[str, Any]:
        """The model and data of the export in a few fields."""
        return {"run": str(self.path), "app": APP, "engine": ENGINE,
                "quantization": self.config.get("quantization"),
                "model": self.config.get("model", {}), "data": self.config.get("data")}


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out}: already exists and is not empty; choose a new folder or "
                         "remove it")


def export_run(run: str | os.PathLike, out: str | os.PathLike, *,
               quantization: str = "int8") -> Path:
    """Export a Transformer run's best weights to a self-contained CTranslate2 folder.

    Args:
        run: a translate run folder (a Transformer trained with ``--subword``).
        out: the folder to create (it may exist if empty); it appears complete or not at all.
        quantization: the stored weight type
            (:data:`attnkit.serving.ctranslate2.QUANTIZATIONS`).

    Returns:
        ``out`` as a Path.

    Raises:
        UsageError: an RNN run, a run trained on words, a non-empty ``out``, an unknown
            quantization, CTranslate2 not installed. CheckpointError: a broken run.
    """
    from attnkit.serving.ctranslate2 import QUANTIZATIONS, export_ctranslate2

    run, out = Path(run), Path(out)
    if quantization not in QUANTIZATIONS:
        raise UsageError(f"quantization must be one of {', '.join(QUANTIZATIONS)}; "
                         f"got {quantization!r}")
    _check_out(out)
    loaded = load_run(run)
    if not isinstance(loaded.model.config, TransformerConfig):
        raise UsageError(f"{run}: an RNN run; CTranslate2 export supports Transformer runs "
                         "only (train with --arch transformer)")
    subword = loaded.pipeline.codec.subword
    if subword is None:
        raise UsageError(f"{run}: trained on words; the export tokenizes with the run's "
                         "sentencepiece model (train with --subword N)")
    p = loaded.pipeline
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        folder = export_ctranslate2(loaded.model.config, loaded.model.state_dict(),
                                    p.src_vocab.itos, p.tgt_vocab.itos, tmp / "model",
                                    quantization=quantization)
        shutil.copyfile(subword.path, folder / SUBWORD_FILE)
        for side, vocab in (("src", p.src_vocab), ("tgt", p.tgt_vocab)):
            vocab.to_json(folder / VOCAB_FILES[side])
        write_json(folder / EXPORT_FILE, {
            "app": APP, "engine": ENGINE, "format": FORMAT, "quantization": quantization,
            "subword": SUBWORD_FILE, "max_source": p.max_source, "source_run": str(run),
            "data": loaded.config["data"], "model": loaded.config["model"],
            "options": loaded.config.get("options", {})})
        if out.exists():
            out.rmdir()   # empty (checked above)
        folder.rename(out)
    finally:
        shutil.rmtree(tmp)
    return out


def _export_config(path: Path) -> dict[str, Any]:
    if not (path / "model.bin").is_file():
        hint = ("a training run: export it first (attnkit translate export RUN OUT)"
                if (path / "best.safetensors").is_file() or (path / "last").is_dir()
                else "not an exported CTranslate2 model (model.bin is missing)")
        raise CheckpointError(f"{path}: {hint}")
    config = read_json(path / EXPORT_FILE, "the export's settings")
    if (not isinstance(config, dict) or config.get("app") != APP
            or config.get("engine") != ENGINE):
        raise CheckpointError(f"{path / EXPORT_FILE}: not a translate CTranslate2 export")
    if not isinstance(config.get("max_source"), int) or not isinstance(config.get("data"), dict):
        raise CheckpointError(f"{path / EXPORT_FILE}: no max_source or data settings")
    return config


def _vocab(path: Path) -> Vocab:
    if not path.is_file():
        raise CheckpointError(f"{path}: vocabulary file is missing")
    try:
        return Vocab.from_json(path)
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{path}: not a vocabulary file ({exc})") from None


def load_exported(path: str | os.PathLike, *, device: str = "cpu") -> ExportedRun:
    """A folder written by :func:`export_run`, ready to translate (``torch``'s thread count
    is CTranslate2's: ``--threads``).

    Raises:
        CheckpointError: not such a folder (a training run says to export it first).
        UsageError: a device CTranslate2 does not take; CTranslate2 not installed.
    """
    from attnkit.serving.ctranslate2 import load_translator, require_ctranslate2

    path = Path(path)
    if device not in DEVICES:
        raise UsageError(f"--device for the CTranslate2 engine: one of {', '.join(DEVICES)}; "
                         f"got {device!r}")
    require_ctranslate2()
    config = _export_config(path)
    try:
        codec = TextCodec(SubwordModel(path / SUBWORD_FILE))
    except DataError as exc:
        raise CheckpointError(str(exc)) from None
    pipeline = TranslatePipeline(codec, _vocab(path / VOCAB_FILES["src"]),
                                 _vocab(path / VOCAB_FILES["tgt"]), config["max_source"])
    translator = load_translator(path, threads=torch.get_num_threads(), device=device)
    return ExportedRun(path, translator, pipeline, config, device)


def translate_exported(run: ExportedRun, sentences: Sequence[str], *, beam: int = 1,
                       alpha: float = 0.6, batch_size: int | None = None,
                       need_weights: bool | str | None = None) -> list[TranslationPrediction]:
    """Translate ``sentences`` with CTranslate2 (``weights`` None: no attention).

    Raises:
        UsageError: an empty sentence, a beam or batch size below 1, attention asked for.
    """
    from attnkit.serving.ctranslate2 import translate_tokens

    if need_weights:
        raise UsageError(NO_ATTENTION)
    if beam < 1:
        raise UsageError(f"--beam must be at least 1, got {beam}")
    if batch_size is not None and batch_size < 1:
        raise UsageError(f"batch size must be at least 1, got {batch_size}")
    p = run.pipeline
    encoded = [encode_source(p, s, i) for i, s in enumerate(sentences, 1)]
    outs = translate_tokens(run.translator, [tokens for tokens, _, _ in encoded], beam=beam,
                            length_penalty=alpha if beam > 1 else None, batch_size=batch_size)
    preds = []
    for source, (tokens, ids, cut), out in zip(sentences, encoded, outs, strict=True):
        unknown = sum(i == p.src_vocab.unk_id for i in ids) / len(ids)
        preds.append(TranslationPrediction(source, tokens, out.tokens,
                                           p.codec.decode(out.tokens, TGT_LANG), None,
                                           out.score, unknown, cut))
    return preds


def evaluate_exported(run: ExportedRun, data: str | None = None, *, beam: int = 1,
                      alpha: float = 0.6, batch_size: int | None = None, strict: bool = False,
                      log: Log = _quiet) -> dict[str, Any]:
    """:func:`attnkit.apps.translate.evaluate` with CTranslate2: the same metrics, with
    ``"engine": "ctranslate2"`` and the export's ``"quantization"``."""
    pairs = eval_pairs(data, run.config["data"], strict=strict, log=log)
    translate = functools.partial(translate_exported, run, beam=beam, alpha=alpha,
                                  batch_size=batch_size)
    metrics, _, _ = score_pairs(translate, pairs, beam=beam, alpha=alpha, engine=ENGINE,
                                max_source=run.pipeline.max_source)
    metrics["quantization"] = run.config.get("quantization")
    return metrics
