"""The engines that translate: attnkit's own decoding (`AttnkitEngine`, attention computed only
when something shows it, else the fused or compiled kernels) beside
`attnkit.apps.translate.ct2.CTranslate2Engine`; `translate_texts` cuts texts into sentences,
translates them as one batch and joins them again (docs/guide/translate.md)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from torch import Tensor, nn

from attnkit.apps.presentation import Command
from attnkit.apps.results import Loaded, Log, stderr_log
from attnkit.apps.translate.pipeline import TranslatePipeline, encode_source, reading
from attnkit.apps.translate.prediction import TranslationPrediction
from attnkit.compiler import Packages, weights_digest
from attnkit.data.sentences import Sentences, per_sentence, readable_sentences
from attnkit.data.text_codec import SRC_LANG, TGT_LANG
from attnkit.data.vocab import UNK, Vocab
from attnkit.decoding import Hypothesis, decode_many, replace_unk
from attnkit.decoding.forced import forced_decode
from attnkit.errors import UsageError
from attnkit.models.compiled import GRAPHS, CompiledTransformer, graph_specs
from attnkit.models.config import TransformerConfig
from attnkit.settings import Option

# ``--compile``: ``on`` compiles before the first decoding (from the user's cache when it
# holds this model's artifacts, else built: about a minute); ``auto`` decodes compiled when the
# cache holds them and a call has at least AUTO_MIN_SENTENCES sentences (fewer end sooner
# eagerly than a warm compile takes), else eagerly; ``off`` never compiles.
COMPILE_MODES = ("auto", "on", "off")
AUTO_MIN_SENTENCES = 64


# A translate run, loaded with the engine that runs it (`AttnkitEngine`; for an exported
# folder, whose ``model`` is None, `CTranslate2Engine`). An engine has a ``name`` (in the
# metrics), the run's ``pipeline``, ``has_attention`` (``no_attention`` says why not),
# ``streams`` (token by token) and ``translate``.
TranslateLoaded = Loaded[nn.Module | None, TranslatePipeline]


def special_ids(vocab: Vocab) -> set[int]:
    """The ids an output drops wherever a model emits them: padding, begin and end of
    sentence (both engines drop them inside a sentence too)."""
    return {vocab.pad_id, vocab.bos_id, vocab.eos_id}


def check_decoding(beam: int, batch_size: int | None) -> None:
    """Refuse a beam or batch size below 1 (one line naming the option)."""
    if isinstance(beam, bool) or not isinstance(beam, int) or beam < 1:
        raise UsageError(f"--beam must be a whole number of at least 1, got {beam!r}")
    if batch_size is not None and batch_size < 1:
        raise UsageError(f"batch size must be at least 1, got {batch_size}")


def unk_note(engine: Any, unk_replace: bool) -> None:
    """Say on stderr that an engine without attention keeps an output ``<unk>``."""
    if unk_replace and not engine.has_attention:
        stderr_log(f"attnkit: note: {engine.no_attention.split(':')[0]}, so an output <unk> is "
                   "kept (no unk replacement)")


class AttnkitEngine:
    """attnkit's own decoding of a loaded model (see the module docstring)."""

    name = "attnkit"
    streams = True

    def __init__(self, model: nn.Module, pipeline: TranslatePipeline, *,
                 compile: str = "off", log: Log = stderr_log):
        if compile not in COMPILE_MODES:
            raise UsageError(f"--compile must be one of {', '.join(COMPILE_MODES)}, got "
                             f"{compile!r}")
        self.model, self.pipeline, self.log = model, pipeline, log
        self.has_attention = getattr(model.config, "attention", None) != "none"
        self.no_attention = "" if self.has_attention else (
            "this model has no attention (trained with --attention none): --html, --plot, "
            "--report and --alignments show attention")
        # Compiled decoding is the Transformer's, on the CPU (a GPU decodes fast eagerly).
        on_cpu = next(model.parameters()).device.type == "cpu"
        self.compile_mode = (compile if isinstance(model.config, TransformerConfig) and on_cpu
                             else "off")
        self.fast: CompiledTransformer | None = None
        self._building = threading.Lock()

    @property
    def path(self) -> str:
        """Which decoding runs without weights: ``"compiled"`` or ``"eager"``."""
        return "compiled" if self.fast is not None else "eager"

    def packages(self) -> Packages:
        """Where this model's compiled decoding lives in the user's cache."""
        return Packages("translate", weights_digest(self.model.state_dict()))

    def compile(self, log: Log | None = None) -> bool:
        """Load the compiled decoder from the user's cache, or build it there (once per
        machine); True when decoding is now compiled. One that cannot be built is one warning
        (on ``log``) and decoding stays eager.
        """
        log = log or self.log
        with self._building:
            if self.fast is not None or self.compile_mode == "off":
                return self.fast is not None
            packages, start = self.packages(), time.monotonic()
            graphs = packages.load(GRAPHS, log)
            built = graphs is None
            if built:
                log(f"attnkit: note: compiling the decoder for this machine (once; kept in "
                    f"{packages.folder.parent})")
                graphs = packages.build(graph_specs(self.model), log)
            if graphs is None:
                self.compile_mode = "off"
                return False
            self.fast = CompiledTransformer(self.model, graphs)
            if built:
                log(f"attnkit: note: decoding compiled in {time.monotonic() - start:.0f} s")
            return True

    def decoder(self, sentences: int, attention: bool | str) -> nn.Module:
        """The model that decodes ``sentences`` sentences: compiled without weights when the
        compile mode says so (`COMPILE_MODES`), else the model itself."""
        if attention or self.compile_mode == "off":
            return self.model
        if self.fast is None and (self.compile_mode == "on" or (
                sentences >= AUTO_MIN_SENTENCES and self.packages().exists())):
            self.compile()
        return self.fast if self.fast is not None else self.model

    def translate(self, sentences: Sequence[str], *, beam: int = 1, alpha: float = 0.6,
                  unk_replace: bool = True, batch_size: int | None = None,
                  attention: bool | str = False) -> list[TranslationPrediction]:
        """Translate ``sentences`` in order; ``attention``: False, True (each prediction's
        ``weights``) or ``"all"`` (also a Transformer's every layer and head); ``unk_replace``
        replaces an output ``<unk>`` by the most attended source token. UsageError: an empty
        sentence, a beam or batch size below 1.
        """
        check_decoding(beam, batch_size)
        encoded, attention = self.read(sentences, attention)
        hyps = decode_many(self.decoder(len(encoded), attention), [ids for _, ids, _ in encoded],
                           beam=beam, alpha=alpha, batch_size=batch_size,
                           need_weights=attention)
        if unk_replace and not attention and self.has_attention:
            hyps = self.unk_attention(encoded, hyps)
        return [self.prediction(s, enc, hyp, unk_replace, keep=bool(attention))
                for s, enc, hyp in zip(sentences, encoded, hyps, strict=True)]

    def read(self, sentences: Sequence[str], attention: bool | str
             ) -> tuple[list[tuple[list[str], list[int], int]], bool | str]:
        """``sentences`` as the model reads them (`encode_source`: an empty one is a
        UsageError naming it), and ``attention`` as this model has it."""
        if attention == "all" and not isinstance(self.model.config, TransformerConfig):
            attention = True   # an RNN has one attention: its [T, S] is the whole story
        return [encode_source(self.pipeline, s, i) for i, s in enumerate(sentences, 1)], attention

    def unk_attention(self, encoded: Sequence[tuple[list[str], list[int], int]],
                      hyps: Sequence[Hypothesis]) -> list[Hypothesis]:
        """``hyps`` decoded without weights, those holding an ``<unk>`` given their rows
        ``[len(tokens), S]`` (last layer, mean over heads) from one forced pass.
        """
        unk = self.pipeline.tgt_vocab.unk_id
        todo = [i for i, h in enumerate(hyps) if unk in h.tokens]
        out = list(hyps)
        forced = forced_decode(self.model, [encoded[i][1] for i in todo],
                               [hyps[i].tokens for i in todo], logprobs=False)
        for i, f in zip(todo, forced, strict=True):
            rows = f.attention[-1].mean(dim=0)[: len(hyps[i].tokens)]   # [T, S]
            out[i] = dataclasses.replace(hyps[i], attention=rows)
        return out

    def output(self, hyp: Hypothesis, source_tokens: Sequence[str], unk_replace: bool
               ) -> tuple[list[str], Tensor | None, np.ndarray | None]:
        """A hypothesis's output tokens, special ones dropped with their rows (``<unk>`` replaced
        when asked), its rows ``[T, S]`` (a Transformer's last layer, mean over heads) and
        ``[layers, heads, T, S]`` with every layer (None when it has none)."""
        v = self.pipeline.tgt_vocab
        skip = special_ids(v)   # dropped with their rows, so that rows stay aligned
        kept = [k for k, i in enumerate(hyp.tokens) if i not in skip]
        words, attn, layers = [v.itos[hyp.tokens[k]] for k in kept], None, None
        if hyp.attention is not None:
            attn = hyp.attention[kept].float()   # [T, S] or [T, layers, heads, S]
            if attn.dim() == 4:
                layers = attn.permute(1, 2, 0, 3).numpy()
                attn = attn[:, -1].mean(dim=1)
        return (replace_unk(words, attn, source_tokens, unk=UNK) if unk_replace else words,
                attn, layers)

    def prediction(self, source: str, encoded: tuple[list[str], list[int], int],
                   hyp: Hypothesis, unk_replace: bool, keep: bool) -> TranslationPrediction:
        """The `TranslationPrediction` of one decoded hypothesis (`output`), the attention kept
        when ``keep``."""
        tokens, ids, cut = encoded
        words, attn, layers = self.output(hyp, tokens, unk_replace)
        return TranslationPrediction(source, tokens, words,
                                     self.pipeline.codec.decode(words, TGT_LANG),
                                     None if attn is None or not keep else attn.numpy(),
                                     float(hyp.score), truncated=cut,
                                     layer_weights=layers if keep else None,
                                     **reading(self.pipeline, tokens, ids))


def summary_of(config: Any) -> str:
    """A translation model in a few words (for pages and listings)."""
    if isinstance(config, TransformerConfig):
        return (f"Transformer, {config.layers} layers, d_model {config.d_model}, "
                f"{config.heads} heads")
    return (f"{config.cell.upper()} encoder-decoder, hidden {config.hidden}, "
            f"{config.attention} attention ({config.style} style)")


def _compile(values: dict[str, Any]) -> int:
    from attnkit.apps.translate import load_run

    loaded = load_run(values["run"], device=values.get("device") or "cpu", compile="on")
    if not isinstance(loaded.model.config, TransformerConfig):
        raise UsageError(f"{values['run']}: an RNN run; compiled decoding is for Transformer "
                         "runs (train with --arch transformer)")
    if not loaded.engine.compile():
        return 1
    print(f"compiled: {values['run']} decodes compiled on this machine "
          f"({loaded.engine.packages().folder})")
    return 0


COMPILE_COMMAND = Command(
    "compile", "build a Transformer run's compiled decoding for this machine ahead of time "
    "(kept in the user's cache; eval, predict and serve then start compiled)",
    (Option("run", str, "the translate run folder", metavar="RUN"),),
    _compile, ("attnkit translate compile runs/fr",), runtime=True)


def translate_texts(engine: Any, texts: Sequence[str], *, split: bool = True,
                    **decoding: Any) -> list[TranslationPrediction]:
    """Translate ``texts`` (``split=False``: each is one sentence), one prediction per text, its
    ``sentences`` holding each sentence's own; ``**decoding``: `AttnkitEngine.translate`'s options.
    UsageError: a text without any token the model reads (named), a bad beam or batch size.
    """
    if not split:
        return engine.translate(texts, **decoding)
    cuts = [text_sentences(engine, text, i) for i, text in enumerate(texts, 1)]
    return per_sentence(texts, cuts, lambda flat: engine.translate(flat, **decoding),
                        lambda text, parts, cut: TranslationPrediction.paragraph(
                            text, parts, cut.join([p.text for p in parts])))


def text_sentences(engine: Any, text: str, index: int) -> Sentences | None:
    """``text``'s sentences that hold a token the model reads, or None when there is only one
    (also what `streaming.stream_texts` decodes). UsageError: no token (``index`` names it).
    """
    codec = engine.pipeline.codec
    found = readable_sentences(text, SRC_LANG,
                               lambda s: bool(codec.encode_capped(s, SRC_LANG, 1)[0]))
    if found is None:
        encode_source(engine.pipeline, text, index)   # an empty text: its one-line error
    return found
