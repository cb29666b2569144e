"""The translate app on CTranslate2: export a Transformer run into a self-contained folder
(`write_export`, ``EXPORT_COMMAND``; its ``manifest.json`` refuses an edited export) and
translate with it (`CTranslate2Engine`). docs/guide/translate.md ("CTranslate2")."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from attnkit.apps.outputs import EXPORT, check_outside_runs, writing
from attnkit.apps.presentation import Command
from attnkit.apps.run_files import FORMAT, read_config
from attnkit.apps.translate.engines import TranslateLoaded, check_decoding, special_ids, summary_of
from attnkit.apps.translate.pipeline import (
    APP,
    SUBWORD_FILE,
    VOCAB_FILES,
    WORDS_FILE,
    TranslatePipeline,
    encode_source,
    reading,
    run_model_config,
    run_pipeline,
)
from attnkit.apps.translate.prediction import TranslationPrediction
from attnkit.data.text_codec import TGT_LANG
from attnkit.errors import AttnkitError, CheckpointError, UsageError
from attnkit.fileio import read_json_object
from attnkit.models.config import TransformerConfig
from attnkit.settings import Option

EXPORT_FILE = "attnkit.json"
ENGINE = "ctranslate2"
DEVICES = ("cpu", "cuda", "auto")
NO_ATTENTION = ("the CTranslate2 engine computes no attention: --html, --plot, --report and "
                "--alignments need --engine attnkit (with the training run)")


class CTranslate2Engine:
    """Translation by CTranslate2 of an exported run (see the module docstring)."""

    name = ENGINE
    has_attention = False
    no_attention = NO_ATTENTION
    streams = False

    def __init__(self, translator: Any, pipeline: TranslatePipeline):
        self.translator, self.pipeline = translator, pipeline

    def translate(self, sentences: Sequence[str], *, beam: int = 1, alpha: float = 0.6,
                  unk_replace: bool = True, batch_size: int | None = None,
                  attention: bool | str = False) -> list[TranslationPrediction]:
        """As `attnkit.apps.translate.engines.AttnkitEngine.translate`, without attention (so
        ``unk_replace`` does nothing). UsageError: also attention asked for.
        """
        from attnkit.ct2_export.ctranslate2 import translate_tokens

        if attention:
            raise UsageError(NO_ATTENTION)
        check_decoding(beam, batch_size)
        p = self.pipeline
        encoded = [encode_source(p, s, i) for i, s in enumerate(sentences, 1)]
        outs = translate_tokens(self.translator, [tokens for tokens, _, _ in encoded],
                                beam=beam, length_penalty=alpha if beam > 1 else None,
                                batch_size=batch_size)
        # attnkit drops special tokens a model emits inside a sentence; so does this engine.
        specials = {p.tgt_vocab.itos[i] for i in special_ids(p.tgt_vocab)}
        return [TranslationPrediction(source, tokens, words, p.codec.decode(words, TGT_LANG), None,
                                      out.score, truncated=cut, **reading(p, tokens, ids))
                for source, (tokens, ids, cut), out in zip(sentences, encoded, outs, strict=True)
                for words in [[w for w in out.tokens if w not in specials]]]


def write_export(loaded: TranslateLoaded, out: str | os.PathLike, *,
                 quantization: str = "int8") -> Path:
    """Export a loaded Transformer ``--subword`` run to a self-contained CTranslate2 folder ``out``
    (it may exist if empty; it appears complete or not at all); returns ``out`` as a Path.
    UsageError: an RNN run, a word run, a non-empty or unwritable ``out``, an unknown
    ``quantization`` (`attnkit.ct2_export.ctranslate2.QUANTIZATIONS`), CTranslate2 missing.
    """
    from attnkit.ct2_export.ctranslate2 import export_ctranslate2

    if not isinstance(loaded.model.config, TransformerConfig):
        raise UsageError(f"{loaded.path}: an RNN run; CTranslate2 export supports Transformer "
                         "runs only (train with --arch transformer)")
    p = loaded.pipeline
    if p.codec.subword is None:
        raise UsageError(f"{loaded.path}: trained on words; the export tokenizes with the "
                         "run's sentencepiece model (train with --subword N)")
    settings = {"app": APP, "engine": ENGINE, "format": FORMAT, "quantization": quantization,
                "subword": SUBWORD_FILE, "max_source": p.max_source,
                "source_run": str(loaded.path), "data": loaded.config["data"],
                "model": loaded.config["model"], "options": loaded.config.get("options", {})}
    check_outside_runs(out, "export")
    files = {SUBWORD_FILE: Path(p.codec.subword.path).read_bytes(),
             VOCAB_FILES["src"]: p.src_vocab, VOCAB_FILES["tgt"]: p.tgt_vocab,
             **({WORDS_FILE: p.known_words} if p.known_words is not None else {}),
             EXPORT_FILE: settings}
    return writing(Path(out), EXPORT, lambda target: export_ctranslate2(
        loaded.model.config, loaded.model.state_dict(), p.src_vocab.itos, p.tgt_vocab.itos,
        target, quantization=quantization, files=files))


def _training_run_hint(path: Path) -> str:
    """What to do with a training run given to the CTranslate2 engine: export it, unless the
    export would refuse it (then: use attnkit's engine), so the hint never leads to a refusal."""
    try:
        config = read_config(path, APP)
        exportable = (config.get("options", {}).get("subword")
                      and isinstance(run_model_config(path, config), TransformerConfig))
    except AttnkitError:
        exportable = True   # the export names what is wrong with the run
    return ("a training run: export it first (attnkit translate export RUN OUT)" if exportable
            else "a training run that CTranslate2 cannot run (it takes Transformers trained "
            "with --subword): use it without --engine ctranslate2")


def load_exported(path: str | os.PathLike, *, device: str = "cpu") -> TranslateLoaded:
    """A folder written by `write_export`, checked (its manifest) and ready to translate on
    torch's thread count. CheckpointError: not such a folder (a training run says to export it
    first), a changed file. UsageError: a device CTranslate2 does not take; CTranslate2 not
    installed.
    """
    from attnkit.ct2_export.ctranslate2 import check_manifest, load_translator, require_ctranslate2

    path = Path(path)
    if device not in DEVICES:
        raise UsageError(f"--device for the CTranslate2 engine: one of {', '.join(DEVICES)}; "
                         f"got {device!r}")
    require_ctranslate2()
    if not (path / "model.bin").is_file():
        hint = (_training_run_hint(path)
                if (path / "best.safetensors").is_file() or (path / "last").is_dir()
                else "not an exported CTranslate2 model (model.bin is missing)")
        raise CheckpointError(f"{path}: {hint}")
    config = read_json_object(path / EXPORT_FILE, "the export's settings", root=path)
    if config.get("app") != APP or config.get("engine") != ENGINE:
        raise CheckpointError(f"{path / EXPORT_FILE}: not a translate CTranslate2 export")
    check_manifest(path)
    model_config = run_model_config(path, config)
    pipeline = run_pipeline(path, config, model_config)
    try:
        translator = load_translator(path, threads=torch.get_num_threads(), device=device)
    except (RuntimeError, ValueError, IndexError, KeyError, OSError, EOFError) as exc:
        # What CTranslate2's C++ loader throws for a damaged model.bin, as a Python error.
        raise CheckpointError(f"{path}: CTranslate2 cannot load this model "
                              f"({str(exc).splitlines()[0]})") from None
    return TranslateLoaded(path, APP, None, pipeline, config, device,
                           engine=CTranslate2Engine(translator, pipeline),
                           description=f"{summary_of(model_config)} (CTranslate2, "
                                       f"{config.get('quantization')})", trained_here=False)


def _export(values: dict[str, Any]) -> int:
    from attnkit.apps.translate import export_run

    out = export_run(values["run"], values["out"], quantization=values["quantization"])
    print(f"exported: {out} (CTranslate2, {values['quantization']}); use it with "
          f"--engine ctranslate2 --run {out}")
    return 0


EXPORT_COMMAND = Command(
    "export", "export a Transformer run (trained with --subword) to a self-contained "
    "CTranslate2 folder",
    (Option("run", str, "the translate run folder", metavar="RUN"),
     Option("out", str, "the folder to create (new or empty)", metavar="OUT"),
     Option("--quantization", str, "stored weight type: int8 (default), int8_float32, "
            "int8_float16, int8_bfloat16, int16, float16, bfloat16 or float32",
            default="int8")),
    _export)
