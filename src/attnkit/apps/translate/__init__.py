"""English -> French translation: an attention encoder-decoder trained into a run folder.

`TranslateApp` (registered as ``"translate"``) keeps the `attnkit.apps.base.App` contract; its
methods are the Python API, here as functions too (``train``, ``evaluate``, ``predict``,
``load_run``, `export_run`). A guide with examples: docs/guide/translate.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from attnkit.apps.base import App, TinyRun
from attnkit.apps.translate import ct2, engines, evaluation, streaming, training
from attnkit.apps.translate import prepare as preparation
from attnkit.apps.translate.align_command import ALIGN_COMMANDS
from attnkit.apps.translate.engines import COMPILE_COMMAND, COMPILE_MODES, TranslateLoaded
from attnkit.apps.translate.evaluation import format_table
from attnkit.apps.translate.explain import EXPLAIN, add_alignments, add_explanations
from attnkit.apps.translate.page import note_trust
from attnkit.apps.translate.pipeline import (
    RNN_MAX_SOURCE,
    SUBWORD_FILE,
    VOCAB_FILES,
    TranslatePipeline,
    source_limit,
)
from attnkit.apps.translate.prediction import TranslationPrediction
from attnkit.apps.translate.settings import FIELDS, TranslateSettings
from attnkit.apps.translate.streaming import StreamStep
from attnkit.errors import UsageError
from attnkit.explain.captum import explain_methods
from attnkit.settings import Option, help_of, options_of

__all__ = ["APP", "RNN_MAX_SOURCE", "SUBWORD_FILE", "VOCAB_FILES", "TranslateApp",
           "TranslateLoaded", "TranslatePipeline", "TranslateSettings",
           "TranslationPrediction", "evaluate", "export_run", "load_run", "predict",
           "source_limit", "train"]

JSON_KEYS = ("bleu", "chrf", "counts", "sentences", "references", "beam", "by_length",
             "signature", "single_ref", "sentences_per_s", "engine", "quantization",
             "truncated", "max_source_tokens", "unknown")

EXAMPLES = (
    "attnkit translate train --data synthetic --out runs/demo        # its 2-min budget",
    "attnkit translate train --data synthetic --out runs/luong --attention general --style luong",
    "attnkit translate train --data synthetic --out runs/base --attention none   # no attention",
    "attnkit translate train --data ../shared/data/eng-fra --out runs/fr --arch transformer "
    "--max-minutes 30",
    "attnkit translate train --resume runs/fr --max-minutes 60        # continue an interrupted "
    "run",
    "attnkit translate eval --run runs/demo --data synthetic --beam 5 --json",
    'attnkit translate predict --run runs/demo "The cat does not see her." --plot cat.png',
    'attnkit translate predict --run runs/demo "I am cold." --html cold.html   # every layer/head',
    'echo "I will take these letters." | attnkit translate predict --run runs/demo --json',
    "attnkit translate export runs/fr runs/fr-ct2 --quantization int8   # CTranslate2 (a "
    "Transformer trained with --subword; pip install 'attnkit[serve]')",
    "attnkit translate eval --run runs/fr-ct2 --engine ctranslate2 --beam 5 --json",
    "",
    "--data is \"synthetic\" (built-in grammar corpus), \"tatoeba\" (download), a folder with",
    "train/valid/test .tsv[.gz] files, or one english<TAB>french pairs file (split 96/2/2).",
)
_DECODING = (
    Option("--beam", int, "beam size (default 1 = greedy)", ("eval", "predict"), default=1),
    Option("--alpha", float, "length penalty (beam > 1; GNMT for attnkit, length ** alpha for "
           "CTranslate2; default 0.6)", ("eval", "predict"), default=0.6),
    Option("--no-unk-replace", None, "keep <unk> instead of copying the most attended source "
           "word", ("eval", "predict"), dest="unk_replace", const=False),
    Option("--engine", str, "attnkit (default) or ctranslate2: then --run is a folder written "
           "by `attnkit translate export` (no attention: no --html/--plot/--report, <unk> "
           "kept)", ("eval", "predict"), choices=("attnkit", "ctranslate2"), stage="load"),
    Option("--compile", str, "decode compiled (a Transformer, without attention): auto (the "
           "default: when `translate compile` built it for this machine and the call is "
           "large), on (build it now if needed, ~1 minute once), off", ("eval", "predict"),
           choices=COMPILE_MODES, stage="load", default="auto"),
    Option("--explain", str, "explanations beside attention: rollout, grad-input, "
           "integrated-gradients (comma-separated, or all; the first is what --plot draws; the "
           "page offers them all; gradients need pip install 'attnkit[explain]')",
           ("predict",), metavar="METHOD"),
    Option("--alignments", None, "add word links between each input and its translation "
           "(JSON \"alignment\", outlined on the --html page)", ("predict",)),
    Option("--no-split", None, "read each input (eval: each source of a --data file) as one "
           "sentence; by default a text is cut into sentences, translated in one batch and "
           "joined, keeping its paragraphs", ("eval", "predict"), dest="split", const=False),
)
# The training options come from the settings (their help states each field's default), and
# so does the help of those every app shares.
OPTIONS = (*options_of(TranslateSettings), *_DECODING)
TRAIN_HELP = {name: help_of(FIELDS[name])
              for name in ("epochs", "batch_size", "lr", "max_minutes", "patience")}


class TranslateApp(App, configure=TranslateSettings.configure, prepare=preparation.prepare,
                   reload=preparation.reload, fit=training.fit, load=preparation.load,
                   evaluation=evaluation.evaluation, after_training=evaluation.after_training):
    """English -> French translation with attention (RNN or Transformer)."""

    name = "translate"
    help = "English -> French translation with attention (RNN or Transformer)"
    description = "Train, evaluate and run attention translation models; plot alignments."
    inputs = "sentence"
    evaluation_keys = ("sentences", "beam", "alpha", "unk_replace", "engine",
                       "max_source_tokens", "quantization")
    options, examples, train_help = OPTIONS, EXAMPLES, TRAIN_HELP
    commands = (*ALIGN_COMMANDS, ct2.EXPORT_COMMAND, COMPILE_COMMAND)
    headline = ("bleu", "chrf")
    text_attention = False   # a translation line is text: the fused path, no weights

    def predictions(self, loaded: TranslateLoaded, inputs: Sequence[str], *, beam: int = 1,
                    alpha: float = 0.6, unk_replace: bool = True,
                    batch_size: int | None = None, attention: bool | str | None = None,
                    explain: str | Sequence[str] | None = None,
                    alignments: bool = False, split: bool = True
                    ) -> list[TranslationPrediction]:
        """Translate ``inputs``, each text cut into sentences (``split=False``: one) and joined
        again (its ``sentences`` hold them), all in one batch.

        Args:
            beam, alpha: beam size (1 = greedy) and length penalty (attnkit: GNMT;
                CTranslate2: ``length ** alpha``).
            unk_replace: replace an output ``<unk>`` by the most attended source token.
            attention: keep the attention (None: the engine's default); ``"all"`` also
                ``layer_weights``. CTranslate2 refuses True and ``"all"``.
            explain: other explanations (``"rollout"``, ``"grad-input"``,
                ``"integrated-gradients"``, a list or ``"all"``); the first is what a figure draws.
            alignments: add word links between each sentence and its translation.
        """
        engine, methods = loaded.engine, explain_methods(explain, EXPLAIN)
        attention = engine.has_attention if attention is None else attention
        if (attention or methods or alignments) and not engine.has_attention:
            raise UsageError(engine.no_attention)
        engines.unk_note(engine, unk_replace)
        preds = engines.translate_texts(engine, inputs, split=split, beam=beam, alpha=alpha,
                                        unk_replace=unk_replace, batch_size=batch_size,
                                        attention=attention or bool(methods) or alignments)
        sentences = [q for p in preds for q in p.sentences or [p]]
        if methods:
            add_explanations(loaded, sentences, methods)
            for p in (*sentences, *preds):
                p.shown = methods[0]
        elif attention:
            note_trust(preds, loaded.model.config)
        if alignments:
            add_alignments(loaded, sentences)
        return preds

    def stream(self, loaded: TranslateLoaded, inputs: Sequence[str], *,
               attention: bool | str = True, unk_replace: bool = True,
               split: bool = True) -> Iterator[StreamStep]:
        """Greedy translation of ``inputs`` token by token, sentence after sentence
        (`streaming.stream_texts`; ``/v1/translate/stream``). UsageError: the CTranslate2
        engine, no sentence, a sentence without any token.
        """
        inputs = self.checked_inputs(inputs, "stream")
        if not loaded.engine.streams:
            raise UsageError("this engine does not stream tokens (a CTranslate2 export): use "
                             "the training run, with attnkit's engine")
        return streaming.stream_texts(loaded.engine, inputs, split=split, attention=attention,
                                      unk_replace=unk_replace)

    def tiny(self, folder: Path) -> TinyRun:
        """A bi-GRU of 16 units on 300 synthetic pairs (train/valid/test files in ``folder``)."""
        from attnkit.data.synthetic_fr import synthetic_splits

        data = Path(folder) / "pairs"
        data.mkdir(parents=True, exist_ok=True)
        for split, pairs in synthetic_splits(0, 300, 20, 20).items():
            (data / f"{split}.tsv").write_text("".join(f"{en}\t{fr}\n" for en, fr in pairs),
                                               encoding="utf-8")
        return TinyRun({"data": str(data), "hidden": 16, "emb_dim": 8, "epochs": 2,
                        "batch_size": 16, "max_minutes": None, "progress": False,
                        "examples": 2}, ["The cat does not see her.", "I am cold."])

    format_metrics = staticmethod(format_table)

    def json_metrics(self, metrics: dict[str, Any]) -> dict[str, Any]:
        return {k: metrics[k] for k in JSON_KEYS if k in metrics}


APP = TranslateApp()


# The Python API: the app's own methods (`App.train` takes the data first, or a mapping).
train, load_run, evaluate, predict = APP.train, APP.load, APP.evaluate, APP.predict


def export_run(run: str | os.PathLike | TranslateLoaded, out: str | os.PathLike, *,
               quantization: str = "int8") -> Path:
    """Export a Transformer run to a self-contained CTranslate2 folder
    (`attnkit.apps.translate.ct2.write_export`)."""
    return ct2.write_export(APP._loaded(run, device=None, engine=None), out,
                            quantization=quantization)
