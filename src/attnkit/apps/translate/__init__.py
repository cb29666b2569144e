"""English -> French translation: an attention encoder-decoder trained into a run folder.

The app (`TranslateApp`, registered as ``"translate"``) keeps the contract of
`attnkit.apps.base.App`; the functions here are its Python API:

* `train` ``(data, out, *, resume=False, overwrite=False, **overrides)`` -> `Run`; overrides
  are `TranslateSettings` fields. The run folder gets ``config.json``, ``vocab_src.json`` /
  ``vocab_tgt.json`` (and ``subword.model`` with ``subword``), ``metrics.jsonl``,
  ``train.log``, ``best.safetensors``, ``last/``, then ``test_metrics.json``, ``heatmap.png``
  and ``report.html``.
* `evaluate` ``(run, data=None, *, beam=1, ...)`` -> BLEU/chrF of free-running decoding
  (`attnkit.apps.translate.evaluation`).
* `predict` ``(run, sentences)`` -> `TranslationPrediction` s, each with its attention
  ``[T_tgt, T_src]`` (and, with ``attention="all"``, a Transformer's
  ``[layers, heads, T_tgt, T_src]``).
* ``APP.stream(loaded, sentences)`` -> greedy translation token by token, each token with its
  attention row (`attnkit.apps.translate.streaming`).
* `load_run` ``(run)`` -> a `Loaded` run; ``engine="ctranslate2"`` loads a folder written by
  `export_run` (`attnkit.apps.translate.ct2`).

``data``: ``"synthetic"``, ``"tatoeba"``, a folder with train/valid/test files, or one pairs
file split 96/2/2 (`attnkit.data.translation_splits`).

Example:
    ```python
    train("synthetic", "runs/demo")                 # ~2-3 minutes on 2 CPU cores
    evaluate("runs/demo", beam=5)["bleu"]
    p = predict("runs/demo", ["The cat does not see her."])[0]
    p.text, p.weights.shape                         # "Le chat ne la voit pas .", (7, 7)
    ```
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from attnkit.apps.base import App, Evaluation, Loaded, Log, Run, TinyRun, stderr_log
from attnkit.apps.options import explain_methods
from attnkit.apps.translate import ct2, evaluation, loading, streaming, training
from attnkit.apps.translate import prepare as preparation
from attnkit.apps.translate.cli_options import COMMANDS, EXAMPLES, OPTIONS
from attnkit.apps.translate.explain import EXPLAIN, add_alignments, add_explanations
from attnkit.apps.translate.metrics import format_table
from attnkit.apps.translate.pipeline import (
    RNN_MAX_SOURCE,
    SUBWORD_FILE,
    VOCAB_FILES,
    TranslatePipeline,
    source_limit,
)
from attnkit.apps.translate.prediction import TranslationPrediction, most_reordered
from attnkit.apps.translate.settings import TranslateSettings
from attnkit.apps.translate.streaming import StreamStep
from attnkit.errors import UsageError

__all__ = ["APP", "RNN_MAX_SOURCE", "SUBWORD_FILE", "VOCAB_FILES", "TranslateApp",
           "TranslatePipeline", "TranslateSettings", "TranslationPrediction", "evaluate",
           "export_run", "load_run", "predict", "source_limit", "train"]

JSON_KEYS = ("bleu", "chrf", "counts", "sentences", "references", "beam", "by_length",
             "signature", "single_ref", "sentences_per_s", "engine", "quantization",
             "truncated", "max_source_tokens", "unknown")


class TranslateApp(App, steps=(preparation, training, loading)):
    """English -> French translation with attention (RNN or Transformer)."""

    name = "translate"
    help = "English -> French translation with attention (RNN or Transformer)"
    description = "Train, evaluate and run attention translation models; plot alignments."
    inputs = "sentence"
    options = OPTIONS
    examples = EXAMPLES
    commands = COMMANDS
    headline = ("bleu", "chrf")
    text_attention = False   # a translation line is text: the fused path, no weights

    def evaluation(self, loaded: Loaded, data: Any, *, report: int = 0,
                   **options: Any) -> Evaluation:
        if not report:   # a report asks for attention: refused first, one line
            _unk_note(loaded.engine, options.get("unk_replace", True))
        return evaluation.evaluation(loaded, data, report=report, **options)

    def predictions(self, loaded: Loaded, inputs: Sequence[str], *, beam: int = 1,
                    alpha: float = 0.6, unk_replace: bool = True,
                    batch_size: int | None = None, attention: bool | str | None = None,
                    need_weights: bool | str | None = None,
                    explain: str | Sequence[str] | None = None,
                    alignments: bool = False) -> list[TranslationPrediction]:
        """Translate ``inputs``.

        Args:
            inputs: the sentences.
            beam, alpha: beam size (1 = greedy) and length penalty (attnkit: GNMT;
                CTranslate2: ``length ** alpha``).
            unk_replace: replace an output ``<unk>`` by the most attended source token.
            batch_size: at most this many sentences per batch (None: the engine's default).
            attention: keep the attention (None: the engine's default, True for attnkit);
                ``"all"`` also a Transformer's ``layer_weights`` (the explorer page); False is
                faster. CTranslate2 has none and refuses True and ``"all"``.
            need_weights: the older name of ``attention``.
            explain: explanations to add beside attention (``"rollout"``, ``"grad-input"``,
                ``"integrated-gradients"``, a comma-separated list or ``"all"``); the first one
                is what a figure draws (`attnkit.apps.translate.explain`).
            alignments: add word links between each input and its translation.
        """
        if attention is None:
            attention = need_weights
        if isinstance(inputs, str):
            raise UsageError("predict takes a list of sentences, not one string")
        if not inputs:
            raise UsageError("no sentence given: nothing to translate")
        engine = loaded.engine
        if attention is None:
            attention = engine.has_attention   # attnkit keeps it, CTranslate2 has none
        if attention and not engine.has_attention:
            raise UsageError(engine.no_attention)
        _unk_note(engine, unk_replace)
        methods = explain_methods(explain, EXPLAIN)
        if (methods or alignments) and not engine.has_attention:
            raise UsageError(engine.no_attention)
        preds = engine.translate(inputs, beam=beam, alpha=alpha, unk_replace=unk_replace,
                                 batch_size=batch_size,
                                 attention=attention or bool(methods) or alignments)
        if methods:
            add_explanations(loaded, preds, methods)
            for p in preds:
                p.shown = methods[0]
        if alignments:
            add_alignments(loaded, preds)
        return preds

    def stream(self, loaded: Loaded, inputs: Sequence[str], *, attention: bool | str = True,
               unk_replace: bool = True) -> Iterator[StreamStep]:
        """Greedy translation of ``inputs`` token by token, each token with its attention row
        (`attnkit.apps.translate.streaming.stream`; the server's ``/v1/translate/stream``).

        Raises:
            UsageError: the CTranslate2 engine (it does not stream), no sentence, a sentence
                without any token.
        """
        if isinstance(inputs, str):
            raise UsageError("stream takes a list of sentences, not one string")
        if not inputs:
            raise UsageError("no sentence given: nothing to translate")
        if not loaded.engine.streams:
            raise UsageError("this engine does not stream tokens (a CTranslate2 export): use "
                             "the training run, with attnkit's engine")
        return streaming.stream(loaded.engine, inputs, attention=attention,
                                unk_replace=unk_replace)

    def after_training(self, loaded: Loaded, metrics: dict[str, Any], log: Log) -> None:
        """The test lines, a few examples, the heatmap of the most re-ordered sentence and
        the run's explorer page (``report.html``)."""
        from attnkit.apps.outputs import PAGE, write_output
        from attnkit.apps.translate.page import report_page
        from attnkit.data.pairs import group_references
        from attnkit.data.translation_splits import load_splits

        log(f"test: BLEU {metrics['bleu']:.2f}  chrF {metrics['chrf']:.2f}  "
            f"({metrics['sentences']} sentences, greedy)")
        n = loaded.config.get("options", {}).get("examples", 10)
        groups = group_references(load_splits(loaded.config["data"], progress=False)["test"])
        sources, refs = [en for en, _ in groups[:100]], [r for _, r in groups[:100]]
        engine = loaded.engine
        preds = engine.translate(sources, attention=engine.has_attention)
        for p, r in list(zip(preds, refs, strict=True))[:n]:
            log(f"  EN  {p.source}\n  OUT {p.text}\n  REF {r[0]}")
        if not engine.has_attention:
            log("no heatmap or report.html: this model has no attention (attention='none')")
            return
        plottable = [p for p in preds if p.weights is not None and p.tokens]
        if plottable:
            shown = most_reordered(plottable)
            shown.render(loaded.path / "heatmap.png")
            log(f"heatmap: {loaded.path / 'heatmap.png'} ({shown.source!r} -> {shown.text!r})")
        if not any(p.tokens for p in preds[:n]):
            log(f"no report.html: no example to show (--examples {n}, or empty translations)")
            return
        shown_all = engine.translate(sources[:n], attention="all")
        write_output(loaded.path / "report.html", PAGE,
                     report_page(metrics, shown_all, refs[:n], loaded.summary()))
        log(f"report: {loaded.path / 'report.html'}")

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

    def format_metrics(self, metrics: dict[str, Any]) -> str:
        return format_table(metrics)

    def json_metrics(self, metrics: dict[str, Any]) -> dict[str, Any]:
        return {k: metrics[k] for k in JSON_KEYS if k in metrics}


def _unk_note(engine: Any, unk_replace: bool) -> None:
    if unk_replace and not engine.has_attention:
        stderr_log(f"attnkit: note: {engine.no_attention.split(':')[0]}, so an output <unk> is "
                   "kept (no unk replacement)")


APP = TranslateApp()


def train(data: str | None = None, out: str | os.PathLike = "runs/demo", *,
          resume: bool = False, overwrite: bool = False, log: Log = stderr_log,
          **overrides: Any) -> Run:
    """Train a translation model into ``out``, then score its test split (`App.train`).

    Args:
        data: ``"synthetic"`` (None: the default), ``"tatoeba"``, a pairs file or a
            train/valid/test folder; with ``resume`` None = the run's (another one is refused).
        out: the run folder.
        resume: continue the run in ``out`` with its stored settings; given
            ``epochs``/``max_minutes`` (and ``device``, ``progress``, ``examples``,
            ``strict``, ``patience``) apply, any other setting that differs is refused.
        overwrite: replace the run already in ``out``.
        log: where progress lines go.
        **overrides: `TranslateSettings` fields.
    """
    return APP.train({"data": data, **overrides}, out, resume=resume, overwrite=overwrite,
                     log=log)


def load_run(run: str | os.PathLike, *, device: str = "cpu", weights: str = "best",
             engine: str = "attnkit") -> Loaded:
    """A trained run, or with ``engine="ctranslate2"`` an exported folder (`App.load`)."""
    return APP.load(run, weights=weights, device=device, engine=engine)


def evaluate(run: str | os.PathLike | Loaded, data: str | None = None, **options: Any
             ) -> dict[str, Any]:
    """BLEU/chrF of a run on ``data`` (None: its test split); options as
    `attnkit.apps.translate.evaluation.evaluation` plus ``report``, ``examples``, ``device``,
    ``engine`` (`App.evaluate`)."""
    return APP.evaluate(run, data, **options)


def predict(run: str | os.PathLike | Loaded, inputs: Sequence[str], **options: Any
            ) -> list[TranslationPrediction]:
    """Translate ``inputs`` with a run (`TranslateApp.predictions`; ``device``, ``engine``
    load a folder)."""
    return APP.predict(run, inputs, **options)


def export_run(run: str | os.PathLike | Loaded, out: str | os.PathLike, *,
               quantization: str = "int8") -> Path:
    """Export a Transformer run to a self-contained CTranslate2 folder
    (`attnkit.apps.translate.ct2.export_run`)."""
    return ct2.export_run(APP._loaded(run, device=None, engine=None), out,
                          quantization=quantization)
