"""English -> French translation: data + tokenizer + encoder-decoder + trainer + BLEU + heatmaps.

Three calls, usable from Python (the CLI ``attnkit translate`` only parses arguments for them):

* :func:`train` ``(data, out, ...)`` -> a run folder: ``config.json`` (data spec, model config,
  vocabulary checksums, train config), ``vocab_src.json``/``vocab_tgt.json``, ``metrics.jsonl``,
  ``best.safetensors`` and ``last/`` (the trainer's), then ``test_metrics.json``,
  ``heatmap.png`` and ``report.html`` (test examples with their attention heatmaps).
* :func:`evaluate` ``(run, data)`` -> ``{"bleu", "chrf", "counts", "by_length", ...}``:
  sacrebleu corpus BLEU (cased, 13a tokenizer) and chrF of *free-running* decoding (greedy or
  beam, never teacher forcing); adjacent lines with the same English sentence (Tatoeba's
  alternative translations) are the references of one source (multi-reference BLEU).
* :func:`translate` ``(run, sentences)`` -> :class:`Translation` s with the attention matrix
  ``[target_len, source_len]`` of each (real tokens only, no padding).

``data`` is ``"synthetic"`` (the built-in grammar corpus, :mod:`attnkit.data.synthetic_fr`),
``"tatoeba"`` (downloads the Anki/Tatoeba pairs), a folder with ``train``/``valid``/``test``
``.tsv[.gz]`` files, or one pairs file (split 96/2/2 by English sentence).

Model selection: the validation metric is the BLEU of greedy decoding on (a sample of) the
validation split, evaluated by the trainer once per epoch.

Example::

    train("synthetic", "runs/demo")                     # ~2-3 minutes on 2 CPU cores
    evaluate("runs/demo", "synthetic", beam=5)["bleu"]
    t = translate("runs/demo", ["The cat does not see her."])[0]
    t.text, t.attention.shape                             # "Le chat ne la voit pas .", (7, 7)
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sacrebleu
import torch
from torch import nn

from attnkit.data.batching import bucket_batch_plan
from attnkit.data.pairs import group_references, read_pairs, tatoeba_fra_eng
from attnkit.data.subword import SubwordModel
from attnkit.data.synthetic_fr import synthetic_splits
from attnkit.data.text import detokenize, tokenize
from attnkit.data.translation import TranslationDataset, collate_translation, filter_by_length
from attnkit.data.vocab import UNK, Vocab
from attnkit.decoding import Hypothesis, beam_search, greedy_decode, replace_unk
from attnkit.errors import CheckpointError, DataError
from attnkit.fileio import atomic_write_text
from attnkit.models import build_model, masked_cross_entropy
from attnkit.models.config import RNNSeq2SeqConfig, TransformerConfig, config_from_dict
from attnkit.training import LossOutput, TrainConfig, Trainer, load_weights
from attnkit.training.distributed import is_main_process

Pair = tuple[str, str]
SRC_LANG, TGT_LANG = "en", "fr"
VOCAB_FILES = {"src": "vocab_src.json", "tgt": "vocab_tgt.json"}
SUBWORD_FILE = "subword.model"   # the joint sentencepiece model of a --subword run

# Defaults tuned so that `attnkit translate train --data synthetic` reaches test BLEU >= 95 in
# about 3 minutes on 2 shared CPU cores (README has the measurement).
SYNTHETIC_SIZES = {"train": 20000, "valid": 1000, "test": 1000}
RNN_DEFAULTS = {"emb_dim": 64, "hidden": 128, "layers": 1, "dropout": 0.1,
                "bidirectional": True}
TRANSFORMER_DEFAULTS = {"d_model": 128, "heads": 4, "layers": 2, "ff_dim": 256,
                        "dropout": 0.1}
TRAIN_DEFAULTS = {"epochs": 8, "batch_size": 64, "lr": 3e-3, "max_minutes": 2.0,
                  "grad_clip": 1.0, "early_stopping_patience": 3}
LENGTH_BINS = ((1, 5), (6, 10), (11, 15), (16, 20), (21, 30), (31, None))


# ============================================================================ data

def _group_by_english(pairs: Sequence[Pair]) -> list[list[Pair]]:
    groups: dict[str, list[Pair]] = {}
    for en, fr in pairs:
        groups.setdefault(en, []).append((en, fr))
    return list(groups.values())


def _split_file(pairs: Sequence[Pair], seed: int) -> dict[str, list[Pair]]:
    """96/2/2 split by English sentence (no source in two splits), reproducible from ``seed``."""
    groups = _group_by_english(pairs)
    random.Random(seed).shuffle(groups)
    n_eval = max(1, len(groups) // 50)
    if len(groups) < 3:
        raise DataError(f"need at least 3 distinct English sentences to split, got {len(groups)}")
    def flat(gs: list[list[Pair]]) -> list[Pair]:
        return [p for g in gs for p in g]

    return {"valid": flat(groups[:n_eval]), "test": flat(groups[n_eval:2 * n_eval]),
            "train": flat(groups[2 * n_eval:])}


def _read(path: Path) -> list[Pair]:
    result = read_pairs(path)
    if not result.pairs:
        raise DataError("no sentence pairs found (expected english<TAB>french lines)",
                        path=str(path))
    return result.pairs


def _split_files(folder: Path) -> dict[str, Path] | None:
    found = {}
    for split in ("train", "valid", "test"):
        for ext in (".tsv.gz", ".tsv", ".txt.gz", ".txt"):
            if (folder / f"{split}{ext}").exists():
                found[split] = folder / f"{split}{ext}"
                break
    return found if len(found) == 3 else None


def data_spec(data: str, seed: int = 0, train_size: int | None = None) -> dict[str, Any]:
    """The JSON description of ``data`` that :func:`load_splits` turns back into pairs."""
    if data == "synthetic":
        sizes = dict(SYNTHETIC_SIZES)
        if train_size is not None:
            sizes["train"] = train_size
        return {"kind": "synthetic", "seed": seed, **sizes}
    if data == "tatoeba":
        return {"kind": "tatoeba", "split_seed": seed}
    path = Path(data)
    if path.is_dir():
        if _split_files(path) is None:
            raise DataError("folder needs train, valid and test .tsv[.gz] or .txt[.gz] files",
                            path=str(path))
        return {"kind": "folder", "path": str(path.resolve())}
    if not path.exists():
        raise DataError("no such file or folder (expected synthetic, tatoeba, a pairs file or a "
                        "folder with train/valid/test files)", path=str(path))
    return {"kind": "file", "path": str(path.resolve()), "split_seed": seed}


def load_splits(spec: dict[str, Any], *, progress: bool = True) -> dict[str, list[Pair]]:
    """``{"train", "valid", "test"}`` lists of ``(english, french)`` for a :func:`data_spec`."""
    kind = spec["kind"]
    if kind == "synthetic":
        return synthetic_splits(spec["seed"], spec["train"], spec["valid"], spec["test"])
    if kind == "folder":
        files = _split_files(Path(spec["path"]))
        if files is None:
            raise DataError("train/valid/test files are missing", path=spec["path"])
        return {split: _read(path) for split, path in files.items()}
    if kind == "tatoeba":
        return _split_file(_read(tatoeba_fra_eng(progress=progress)), spec["split_seed"])
    if kind == "file":
        return _split_file(_read(Path(spec["path"])), spec["split_seed"])
    raise DataError(f"unknown data kind {kind!r} in the run's config.json")


def eval_pairs(data: str | None, run_spec: dict[str, Any]) -> list[Pair]:
    """The pairs :func:`evaluate` scores: the run's own test split for ``None`` or the run's
    data name, a folder's test split, or every pair of a file."""
    if data is None or data == run_spec["kind"]:   # "synthetic"/"tatoeba": the run's own split
        return load_splits(run_spec)["test"]
    if data in ("synthetic", "tatoeba"):
        return load_splits(data_spec(data))["test"]
    path = Path(data)
    if path.is_dir():
        files = _split_files(path)
        if files is None:
            raise DataError("folder has no train/valid/test files", path=str(path))
        return _read(files["test"])
    if not path.exists():
        raise DataError("no such file or folder", path=str(path))
    return _read(path)


class TextCodec:
    """Text <-> tokens for both languages: words (:mod:`attnkit.data.text`) by default, or the
    pieces of one joint sentencepiece model (``subword``), whose decoding restores the text.

    Example::

        TextCodec().encode("I'm cold.", "en")          # ["I", "'m", "cold", "."]
        codec = TextCodec(SubwordModel(run / "subword.model"))
        codec.decode(codec.encode("J'ai froid.", "fr"), "fr")   # "J'ai froid."
    """

    def __init__(self, subword: SubwordModel | None = None):
        self.subword = subword

    def encode(self, text: str, lang: str) -> list[str]:
        if self.subword is None:
            return tokenize(text, lang)
        return self.subword.encode(text)

    def decode(self, tokens: Sequence[str], lang: str) -> str:
        if self.subword is None:
            return detokenize(tokens, lang)
        return self.subword.decode(tokens)


def _tokenize_pairs(pairs: Sequence[Pair],
                    codec: TextCodec | None = None) -> list[tuple[list[str], list[str]]]:
    codec = codec or TextCodec()
    return [(codec.encode(en, SRC_LANG), codec.encode(fr, TGT_LANG)) for en, fr in pairs]


def _run_codec(run: Path, config: dict[str, Any]) -> TextCodec:
    """The codec a run was trained with (its ``subword.model`` when it used subwords)."""
    if not config.get("options", {}).get("subword"):
        return TextCodec()
    path = run / SUBWORD_FILE
    if not path.is_file():
        raise CheckpointError(f"{path}: the run's sentencepiece model is missing (it was "
                              "trained with --subword)")
    return TextCodec(SubwordModel(path))


def _vocab_digest(vocab: Vocab) -> str:
    return hashlib.sha256(json.dumps(vocab.itos, ensure_ascii=False).encode()).hexdigest()


# ============================================================================ runs

@dataclass
class Translation:
    """One translated sentence.

    Attributes:
        source: the input text.
        source_tokens: its tokens (as typed; words outside the vocabulary were ``<unk>`` to the
            model).
        tokens: output tokens (``<unk>`` replaced by the most attended source word when asked).
        text: the detokenized translation.
        attention: ``[len(tokens), len(source_tokens)]`` weights, or None (no attention).
        score: log-probability of the output.
    """

    source: str
    source_tokens: list[str]
    tokens: list[str]
    text: str
    attention: np.ndarray | None
    score: float


class Translator:
    """A trained model with its vocabularies; :meth:`load` reads a run folder.

    Example::

        tr = Translator.load("runs/demo")
        tr.translate(["I am cold."], beam=5)[0].text
    """

    def __init__(self, model: nn.Module, src_vocab: Vocab, tgt_vocab: Vocab,
                 run_config: dict[str, Any] | None = None, codec: TextCodec | None = None):
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.run_config = run_config or {}
        self.codec = codec or TextCodec()

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @classmethod
    def load(cls, run: str | Path, *, device: str = "cpu",
             weights: str = "best") -> Translator:
        """Rebuild the model of ``run`` and load its ``best`` (or ``last``) weights.

        Raises:
            CheckpointError: no/corrupt ``config.json``, vocabularies that do not match the
                ones the weights were trained with, a missing or truncated weights file.
        """
        run = Path(run)
        config = read_run_config(run)
        src_vocab, tgt_vocab = _load_vocabs(run, config)
        model = build_model(config["model"])
        if weights == "best" and (run / "best.safetensors").exists():
            path = run / "best.safetensors"
        elif weights in ("best", "last"):
            path = run / "last" / "model.safetensors"
        else:
            raise ValueError(f"weights must be 'best' or 'last', got {weights!r}")
        if not path.exists():
            raise CheckpointError(f"{run}: no weights yet (neither best.safetensors nor "
                                  "last/model.safetensors); train the run first")
        load_weights(model, path)
        model.to(_device(device)).eval()
        return cls(model, src_vocab, tgt_vocab, config, _run_codec(run, config))

    def translate(self, sentences: Sequence[str], *, beam: int = 1, alpha: float = 0.6,
                  unk_replace: bool = True, batch_size: int = 64) -> list[Translation]:
        """Translate sentences (any number; batched by length internally, order kept).

        Raises:
            DataError: an empty sentence (names its position as the line).
        """
        tokens = []
        for i, s in enumerate(sentences):
            toks = self.codec.encode(s, SRC_LANG)
            if not toks:
                raise DataError("empty sentence: nothing to translate", path="<input>",
                                line=i + 1)
            tokens.append(toks)
        ids = [self.src_vocab.encode(t) for t in tokens]
        hyps = decode_ids(self.model, ids, beam=beam, alpha=alpha, batch_size=batch_size)
        out = []
        v = self.tgt_vocab
        skip = {v.pad_id, v.bos_id, v.eos_id}
        for s, toks, hyp in zip(sentences, tokens, hyps, strict=True):
            # Drop stray specials together with their attention rows, so rows stay aligned.
            keep = [k for k, i in enumerate(hyp.tokens) if i not in skip]
            words = [v.itos[hyp.tokens[k]] for k in keep]
            attn = None if hyp.attention is None else hyp.attention[keep]
            if unk_replace:
                words = replace_unk(words, attn, toks, unk=UNK)
            out.append(Translation(s, toks, words, self.codec.decode(words, TGT_LANG),
                                   None if attn is None else attn.numpy(), hyp.score))
        return out


def set_threads(threads: int | None) -> None:
    """``torch.set_num_threads`` (None or 0 = leave torch's default). One thread is the fastest
    for these small models on a shared CPU: measured 15x faster greedy decoding than two
    threads while other processes kept both cores busy."""
    if threads:
        torch.set_num_threads(threads)


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def read_run_config(run: Path) -> dict[str, Any]:
    path = run / "config.json"
    if not path.exists():
        raise CheckpointError(f"{run}: not a translate run folder (config.json is missing)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: corrupt JSON ({exc})") from exc
    if config.get("app") != "translate" or "model" not in config:
        raise CheckpointError(f"{path}: not written by the translate app")
    try:
        config_from_dict(config["model"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: bad model config ({exc})") from exc
    return config


def _load_vocabs(run: Path, config: dict[str, Any]) -> tuple[Vocab, Vocab]:
    vocabs = []
    for side in ("src", "tgt"):
        path = run / VOCAB_FILES[side]
        if not path.exists():
            raise CheckpointError(f"{path}: vocabulary file is missing")
        vocab = Vocab.from_json(path)
        want = config.get("vocab", {}).get(side, {})
        size = config["model"][f"{side}_vocab"]
        if len(vocab) != size or want.get("sha256") not in (None, _vocab_digest(vocab)):
            raise CheckpointError(
                f"{path}: this vocabulary ({len(vocab)} tokens) does not match the one the "
                f"run's weights were trained with ({size} tokens, sha256 "
                f"{str(want.get('sha256'))[:12]}...); restore the run's original vocabulary")
        vocabs.append(vocab)
    return vocabs[0], vocabs[1]


# ============================================================================ decoding

def decode_ids(model: nn.Module, src_ids: Sequence[Sequence[int]], *, beam: int = 1,
               alpha: float = 0.6, batch_size: int = 64) -> list[Hypothesis]:
    """Decode many id sequences: batches of similar length, results in input order."""
    device = next(model.parameters()).device
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    out: list[Hypothesis | None] = [None] * len(src_ids)
    pad = model.config.pad_id
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        width = max(len(src_ids[i]) for i in idx)
        src = torch.full((len(idx), width), pad, dtype=torch.long)
        for row, i in enumerate(idx):
            src[row, : len(src_ids[i])] = torch.tensor(src_ids[i], dtype=torch.long)
        lengths = torch.tensor([len(src_ids[i]) for i in idx])
        src, lengths = src.to(device), lengths.to(device)
        if beam > 1:
            hyps = beam_search(model, src, lengths, beam_size=beam, alpha=alpha)
        else:
            hyps = greedy_decode(model, src, lengths)
        for i, h in zip(idx, hyps, strict=True):
            out[i] = h
    return out  # type: ignore[return-value]


# ============================================================================ metrics

def bleu_chrf(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Corpus BLEU (sacrebleu, cased, 13a) and chrF; ``references[i]`` lists the references
    of sentence ``i`` (any number, at least one)."""
    width = max(len(r) for r in references)
    streams = [[r[k] if k < len(r) else None for r in references] for k in range(width)]
    bleu_metric = sacrebleu.BLEU()   # defaults: cased, 13a tokenizer, exp smoothing
    bleu = bleu_metric.corpus_score(list(hypotheses), streams)
    chrf = sacrebleu.CHRF().corpus_score(list(hypotheses), streams)
    return {"bleu": bleu.score, "chrf": chrf.score,
            "counts": {"matches": list(bleu.counts), "totals": list(bleu.totals),
                       "precisions": [round(p, 2) for p in bleu.precisions],
                       "bp": round(bleu.bp, 4), "sys_len": bleu.sys_len,
                       "ref_len": bleu.ref_len},
            "signature": str(bleu_metric.get_signature())}


def by_length_table(src_lengths: Sequence[int], hypotheses: Sequence[str],
                    references: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """BLEU per source-length bin (words): ``[{"lengths": "1-5", "n": ..., "bleu": ...}]``."""
    rows = []
    for lo, hi in LENGTH_BINS:
        idx = [i for i, n in enumerate(src_lengths) if n >= lo and (hi is None or n <= hi)]
        if not idx:
            continue
        score = bleu_chrf([hypotheses[i] for i in idx], [references[i] for i in idx])
        rows.append({"lengths": f"{lo}-{hi}" if hi else f"{lo}+", "n": len(idx),
                     "bleu": round(score["bleu"], 2)})
    return rows


def score_translator(translator: Translator, pairs: Sequence[Pair], *, beam: int = 1,
                     alpha: float = 0.6, unk_replace: bool = True,
                     batch_size: int = 64) -> tuple[dict[str, Any], list[Translation]]:
    """Metrics of ``translator`` on ``pairs`` (adjacent alternative references grouped).

    Each distinct source is decoded once. ``bleu``/``chrf``/``by_length`` score it against all
    its references; ``single_ref`` scores every *line* of ``pairs`` against its own reference
    only (the usual one-reference-per-line test-set BLEU; an English sentence with k
    alternative translations then counts k times). ``by_length`` rows carry both
    (``bleu`` and ``bleu_single_ref``). ``sentences_per_s`` is the decoding speed.
    """
    groups = group_references(list(pairs))
    if not groups:
        raise DataError("nothing to evaluate: no sentence pairs")
    sources = [en for en, _ in groups]
    refs = [r for _, r in groups]
    start = time.perf_counter()
    outs = translator.translate(sources, beam=beam, alpha=alpha, unk_replace=unk_replace,
                                batch_size=batch_size)
    seconds = time.perf_counter() - start
    hyps = [t.text for t in outs]
    # Lengths in words (not subword pieces), so runs with different tokenizers compare.
    src_lengths = [len(tokenize(t.source, SRC_LANG)) for t in outs]
    metrics = bleu_chrf(hyps, refs)
    metrics["by_length"] = by_length_table(src_lengths, hyps, refs)
    # One line per pair: the hypothesis of its source against that line's reference alone.
    line_hyps = [h for h, r in zip(hyps, refs, strict=True) for _ in r]
    line_refs = [[x] for r in refs for x in r]
    line_lengths = [n for n, r in zip(src_lengths, refs, strict=True) for _ in r]
    single = bleu_chrf(line_hyps, line_refs)
    metrics["single_ref"] = {"bleu": single["bleu"], "chrf": single["chrf"],
                             "lines": len(line_hyps), "counts": single["counts"]}
    single_rows = {r["lengths"]: r for r in by_length_table(line_lengths, line_hyps, line_refs)}
    for row in metrics["by_length"]:
        row["lines"] = single_rows[row["lengths"]]["n"]
        row["bleu_single_ref"] = single_rows[row["lengths"]]["bleu"]
    metrics.update({"sentences": len(groups), "references": sum(len(r) for r in refs),
                    "beam": beam, "alpha": alpha if beam > 1 else None,
                    "decode_seconds": round(seconds, 2),
                    "sentences_per_s": round(len(groups) / max(seconds, 1e-9), 1)})
    return metrics, outs


# ============================================================================ reports

def write_heatmap(t: Translation, path: str | Path, title: str | None = None) -> Path:
    """Save the alignment heatmap of one translation (PNG/SVG/PDF by extension)."""
    from attnkit.viz.heatmap import plot_alignment

    if t.attention is None:
        raise DataError("this model has no attention (attention='none'): nothing to plot")
    if not t.tokens:
        raise DataError(f"the translation of {t.source!r} is empty: no heatmap to plot")
    plot_alignment(t.attention, t.source_tokens, t.tokens, path, title=title)
    return Path(path)


def most_reordered(translations: Sequence[Translation]) -> Translation:
    """The translation whose attention crosses most (inversions of the per-row argmax): the
    heatmap that shows re-ordering, rather than a plain diagonal."""
    def crossings(t: Translation) -> int:
        peaks = t.attention.argmax(axis=1).tolist() if t.attention is not None else []
        return sum(a > b for i, a in enumerate(peaks) for b in peaks[i + 1:])
    return max(translations, key=crossings)


def write_report(path: str | Path, metrics: dict[str, Any], examples: Sequence[Translation],
                 references: Sequence[Sequence[str]], title: str) -> Path:
    """An HTML page: metrics, the by-length table and each example with its heatmap."""
    from attnkit.viz.heatmap import alignment_figure
    from attnkit.viz.report import HtmlReport

    report = HtmlReport(title)
    report.add_section("Metrics")
    report.add_table([[f"{metrics['bleu']:.2f}", f"{metrics['chrf']:.2f}",
                       metrics["sentences"], metrics["beam"]]],
                     header=["BLEU", "chrF", "sentences", "beam"])
    report.add_text(metrics.get("signature", ""), preformatted=True)
    report.add_section("BLEU by source length (words)")
    report.add_table([[r["lengths"], r["n"], r["bleu"]] for r in metrics["by_length"]],
                     header=["source length", "sentences", "BLEU"])
    report.add_section("Test examples")
    for t, refs in zip(examples, references, strict=True):
        report.add_text(f"EN:  {t.source}\nOUT: {t.text}\nREF: " + "\n     ".join(refs),
                        preformatted=True)
        if t.attention is not None and t.tokens:
            fig = alignment_figure(t.attention, t.source_tokens, t.tokens)
            report.add_figure(fig, caption=f"attention: {t.source}")
    return report.write(path)


# ============================================================================ training

def _model_config(arch: str, sizes: tuple[int, int], specials: dict[str, int],
                  overrides: dict[str, Any]):
    if arch == "transformer":
        fields = {f.name for f in dataclasses.fields(TransformerConfig)}
        kw = {**TRANSFORMER_DEFAULTS, **{k: v for k, v in overrides.items() if k in fields}}
        return TransformerConfig(src_vocab=sizes[0], tgt_vocab=sizes[1], **specials, **kw)
    if arch != "rnn":
        raise ValueError(f"arch must be 'rnn' or 'transformer', got {arch!r}")
    fields = {f.name for f in dataclasses.fields(RNNSeq2SeqConfig)}
    kw = {**RNN_DEFAULTS, **{k: v for k, v in overrides.items() if k in fields}}
    return RNNSeq2SeqConfig(src_vocab=sizes[0], tgt_vocab=sizes[1], **specials, **kw)


def _silent(_: str) -> None:
    return None


def _wait_for(path: Path, timeout: float = 600.0) -> None:
    """Block until rank 0 has written ``path`` (multi-process runs share the run folder)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise CheckpointError(f"{path}: not written by rank 0 within {timeout:.0f} s")
        time.sleep(0.5)


def _loss_fn(label_smoothing: float, pad_id: int) -> Callable:
    def loss_fn(model: nn.Module, batch: dict[str, torch.Tensor]) -> LossOutput:
        logits = model(batch["src"], batch["src_lengths"], batch["tgt_in"])
        loss, count = masked_cross_entropy(logits, batch["tgt_out"], pad_id=pad_id,
                                           label_smoothing=label_smoothing)
        return LossOutput(loss, count)
    return loss_fn


def _valid_fn(src_vocab: Vocab, tgt_vocab: Vocab, pairs: Sequence[Pair],
              codec: TextCodec | None = None) -> Callable:
    """Greedy BLEU on ``pairs`` (grouped references): the trainer's selection metric."""
    groups = group_references(list(pairs))

    def evaluate_fn(model: nn.Module) -> dict[str, float]:
        translator = Translator(model, src_vocab, tgt_vocab, codec=codec)
        outs = translator.translate([en for en, _ in groups], batch_size=128)
        return {"bleu": bleu_chrf([t.text for t in outs], [r for _, r in groups])["bleu"]}
    return evaluate_fn


def train(data: str = "synthetic", out: str | Path = "runs/demo", *, arch: str = "rnn",
          attention: str = "additive", cell: str = "gru", style: str = "bahdanau",
          model: dict[str, Any] | None = None, epochs: int | None = None,
          batch_size: int | None = None, lr: float | None = None, seed: int = 0,
          device: str = "auto", max_minutes: float | None = -1.0,
          resume: str | Path | None = None, label_smoothing: float = 0.0,
          max_len: int = 30, min_freq: int = 1, max_vocab: int | None = 30000,
          train_size: int | None = None, valid_sample: int = 300, threads: int | None = None,
          subword: int | None = None, batch_tokens: int | None = None,
          schedule: str | None = None, warmup: int | None = None,
          eval_every: int | None = None, amp: bool = False, progress: bool = True,
          examples: int = 10,
          log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train a translation model into the run folder ``out`` and evaluate it on the test split.

    Args:
        data: ``"synthetic"``, ``"tatoeba"``, a pairs file or a train/valid/test folder.
        out: the run folder (created).
        arch: ``"rnn"`` or ``"transformer"``.
        attention, cell, style: RNN options (:class:`RNNSeq2SeqConfig`).
        model: further model config fields (e.g. ``{"hidden": 256, "layers": 2}``).
        epochs, batch_size, lr: None = the defaults (``TRAIN_DEFAULTS``).
        seed: fixes the data split/generation, initialisation and batch order.
        device: ``auto`` | ``cpu`` | ``cuda``.
        max_minutes: training budget; ``-1`` = the default (2.0), None = unlimited.
        resume: continue the interrupted run in this folder (other options are read from it).
        label_smoothing: for the training loss.
        max_len: drop training pairs with a side longer than this (tokens).
        min_freq, max_vocab: vocabulary building.
        train_size: number of synthetic training pairs (default 20000).
        valid_sample: validation sentences decoded for the selection BLEU (None = all).
        threads: ``torch.set_num_threads`` for this process (None = leave as is).
        subword: train a joint English+French sentencepiece model of about this many pieces
            on the training text (saved as ``RUN/subword.model``) and use one joint
            vocabulary of pieces (a Transformer then shares all its embeddings); None = words.
            ``max_len`` then counts pieces.
        batch_tokens: also cap each batch at this many padded tokens (``batch_size`` still
            caps the sentences), so short-sentence batches get more sentences.
        schedule, warmup: learning-rate schedule (``constant``, ``linear``, ``cosine``,
            ``inverse_sqrt``; decaying ones reach 0 at the end of ``epochs``) and warm-up
            steps; None = constant/0 (rnn), inverse_sqrt/300 (transformer).
        eval_every: validate every this many steps (None = once per epoch, and at the stop).
        amp: bfloat16 autocast for training and validation (also on CPU: about 1.5-2x faster
            for a Transformer on a CPU with AVX512-BF16; weights stay float32).
        examples: test examples printed and put in ``report.html``.
        log: where progress lines go.

    Returns:
        The test metrics (:func:`evaluate`'s dict) plus ``"stop_reason"``, ``"train_seconds"``,
        ``"best_valid_bleu"``, ``"run"``.
    """
    set_threads(threads)
    # Under torchrun every rank runs this function; only rank 0 writes files and evaluates.
    is_main = is_main_process()
    if not is_main:
        log = _silent
    if resume is not None:
        run = Path(resume)
        config = read_run_config(run)
        spec = config["data"]
        src_vocab, tgt_vocab = _load_vocabs(run, config)
        model_cfg = config_from_dict(config["model"])
        train_cfg = TrainConfig.from_dict(config["train"])
        opts = config["options"]
        label_smoothing, max_len, valid_sample = (opts["label_smoothing"], opts["max_len"],
                                                  opts["valid_sample"])
        min_freq, max_vocab = opts["min_freq"], opts["max_vocab"]
        subword, batch_tokens = opts.get("subword"), opts.get("batch_tokens")
        codec = _run_codec(run, config)
        splits = load_splits(spec, progress=progress)
        train_tok, _ = filter_by_length(_tokenize_pairs(splits["train"], codec), max_len)
        log(f"resuming {run}")
    else:
        run = Path(out)
        if (run / "last").exists() or (run / "best.safetensors").exists():
            raise CheckpointError(f"{run} already holds a trained run; pick another --out or "
                                  f"continue it with --resume {run}")
        spec = data_spec(data, seed, train_size)
        splits = load_splits(spec, progress=progress)
        run.mkdir(parents=True, exist_ok=True)
        codec = TextCodec()
        if subword:
            if not is_main:   # rank 0 trains it; the others wait for the file
                _wait_for(run / SUBWORD_FILE)
                codec = TextCodec(SubwordModel(run / SUBWORD_FILE))
            else:
                log(f"training a joint sentencepiece model ({subword} pieces)")
                codec = TextCodec(SubwordModel.train(
                    [text for pair in splits["train"] for text in pair], run / SUBWORD_FILE,
                    vocab_size=subword))
        train_tok, dropped = filter_by_length(_tokenize_pairs(splits["train"], codec), max_len)
        if not train_tok:
            raise DataError("no training pairs left after the length filter", path=str(data))
        if subword:   # one joint vocabulary: pieces are shared between the two languages
            src_vocab = tgt_vocab = Vocab.build([s for pair in train_tok for s in pair],
                                                min_freq=min_freq, max_size=max_vocab)
        else:
            src_vocab = Vocab.build([s for s, _ in train_tok], min_freq=min_freq,
                                    max_size=max_vocab)
            tgt_vocab = Vocab.build([t for _, t in train_tok], min_freq=min_freq,
                                    max_size=max_vocab)
        specials = {"pad_id": tgt_vocab.pad_id, "bos_id": tgt_vocab.bos_id,
                    "eos_id": tgt_vocab.eos_id, "unk_id": tgt_vocab.unk_id}
        overrides = {**(model or {}), "attention": attention, "cell": cell, "style": style}
        if subword and arch == "transformer":
            overrides.setdefault("share_embeddings", True)
        model_cfg = _model_config(arch, (len(src_vocab), len(tgt_vocab)), specials, overrides)
        budget = TRAIN_DEFAULTS["max_minutes"] if max_minutes == -1.0 else max_minutes
        train_cfg = TrainConfig(
            epochs=epochs or TRAIN_DEFAULTS["epochs"],
            batch_size=batch_size or TRAIN_DEFAULTS["batch_size"],
            lr=lr or (TRAIN_DEFAULTS["lr"] if arch == "rnn" else 1e-3), seed=seed,
            device=device, max_minutes=budget, grad_clip=TRAIN_DEFAULTS["grad_clip"],
            early_stopping_patience=TRAIN_DEFAULTS["early_stopping_patience"],
            select_metric="bleu", select_mode="max", progress=progress,
            schedule=schedule or ("constant" if arch == "rnn" else "inverse_sqrt"),
            warmup_steps=warmup if warmup is not None else (0 if arch == "rnn" else 300),
            eval_every_steps=eval_every, amp=amp)
        if is_main:
            for side, vocab in (("src", src_vocab), ("tgt", tgt_vocab)):
                vocab.to_json(run / VOCAB_FILES[side])
        log(f"data: {len(train_tok)} training pairs ({dropped} longer than {max_len} tokens "
            f"dropped), {len(splits['valid'])} valid, {len(splits['test'])} test; vocabulary "
            f"{len(src_vocab)} en / {len(tgt_vocab)} fr")
    torch.manual_seed(train_cfg.seed)
    net = build_model(model_cfg)
    n_params = sum(p.numel() for p in net.parameters())
    log(f"model: {model_cfg.arch} {n_params / 1e6:.2f}M parameters "
        + (f"({model_cfg.cell}, {model_cfg.attention} attention, {model_cfg.style} style)"
           if model_cfg.arch == "rnn" else f"(d_model {model_cfg.d_model})"))
    dataset = TranslationDataset.from_token_pairs(train_tok, src_vocab, tgt_vocab)
    valid = splits["valid"] if valid_sample is None else splits["valid"][:valid_sample]
    metadata = {
        "app": "translate", "data": spec, "model": model_cfg.to_dict(),
        "vocab": {side: {"file": VOCAB_FILES[side], "size": len(v), "sha256": _vocab_digest(v)}
                  for side, v in (("src", src_vocab), ("tgt", tgt_vocab))},
        "options": {"label_smoothing": label_smoothing, "max_len": max_len,
                    "valid_sample": valid_sample, "min_freq": min_freq,
                    "max_vocab": max_vocab, "subword": subword,
                    "batch_tokens": batch_tokens},
    }
    trainer = Trainer(
        net, train_cfg, run, train_dataset=dataset,
        collate_fn=functools.partial(collate_translation, pad_id=model_cfg.pad_id,
                                     bos_id=model_cfg.bos_id, eos_id=model_cfg.eos_id),
        loss_fn=_loss_fn(label_smoothing, model_cfg.pad_id),
        evaluate_fn=_valid_fn(src_vocab, tgt_vocab, valid, codec),
        batch_plan=bucket_batch_plan(dataset.lengths(), train_cfg.batch_size,
                                     max_tokens=batch_tokens),
        run_metadata=metadata)
    result = trainer.fit(resume=resume is not None)
    log(f"training stopped ({result.stop_reason}) after {result.global_step} steps, "
        f"{result.elapsed:.0f} s; best validation BLEU {result.best_metric}")
    if not is_main:
        return {"run": str(run), "stop_reason": result.stop_reason}
    load_weights(net, run / "best.safetensors")
    translator = Translator(net.eval(), src_vocab, tgt_vocab, metadata, codec)
    metrics, outs = score_translator(translator, splits["test"])
    metrics.update({"stop_reason": result.stop_reason, "train_seconds": round(result.elapsed, 1),
                    "best_valid_bleu": result.best_metric, "run": str(run)})
    atomic_write_text(run / "test_metrics.json", json.dumps(metrics, indent=2))
    groups = group_references(list(splits["test"]))
    log(f"test: BLEU {metrics['bleu']:.2f}  chrF {metrics['chrf']:.2f}  "
        f"({metrics['sentences']} sentences, greedy)")
    for t, (_, refs) in list(zip(outs, groups, strict=True))[:examples]:
        log(f"  EN  {t.source}\n  OUT {t.text}\n  REF {refs[0]}")
    plottable = [t for t in outs[:100] if t.attention is not None and t.tokens]
    if plottable:
        shown = most_reordered(plottable)
        write_heatmap(shown, run / "heatmap.png", title=shown.source)
        log(f"heatmap: {run / 'heatmap.png'} ({shown.source!r} -> {shown.text!r})")
    write_report(run / "report.html", metrics, outs[:examples],
                 [r for _, r in groups[:examples]], f"attnkit translate: {run.name}")
    log(f"report: {run / 'report.html'}")
    return metrics


# ============================================================================ public calls

def evaluate(run: str | Path, data: str | None = None, *, beam: int = 1, alpha: float = 0.6,
             device: str = "cpu", unk_replace: bool = True, batch_size: int = 64,
             report: str | Path | None = None, examples: int = 10) -> dict[str, Any]:
    """BLEU/chrF of a run on ``data`` (None = the run's own test split); see the module doc.

    Returns:
        ``{"bleu", "chrf", "counts", "by_length", "sentences", "references", "beam", ...}``;
        with ``report`` an HTML page with the first ``examples`` translations and heatmaps.
    """
    run = Path(run)
    translator = Translator.load(run, device=device)
    pairs = eval_pairs(data, translator.run_config["data"])
    metrics, outs = score_translator(translator, pairs, beam=beam, alpha=alpha,
                                     unk_replace=unk_replace, batch_size=batch_size)
    if report is not None:
        groups = group_references(list(pairs))
        write_report(report, metrics, outs[:examples], [r for _, r in groups[:examples]],
                     f"attnkit translate: {run.name}")
    return metrics


def translate(run: str | Path | Translator, sentences: Sequence[str], *, beam: int = 1,
              alpha: float = 0.6, device: str = "cpu",
              unk_replace: bool = True) -> list[Translation]:
    """Translate ``sentences`` with a run folder (or a loaded :class:`Translator`)."""
    translator = run if isinstance(run, Translator) else Translator.load(run, device=device)
    return translator.translate(sentences, beam=beam, alpha=alpha, unk_replace=unk_replace)


def format_table(metrics: dict[str, Any]) -> str:
    """The metrics as a small text table (for the CLI)."""
    lines = [f"BLEU  {metrics['bleu']:6.2f}   chrF  {metrics['chrf']:6.2f}   "
             f"sentences {metrics['sentences']}   references {metrics['references']}   "
             f"beam {metrics['beam']}   (multi-reference)"]
    single = metrics.get("single_ref")
    if single:
        lines.append(f"BLEU  {single['bleu']:6.2f}   chrF  {single['chrf']:6.2f}   "
                     f"lines {single['lines']}   (one reference per line)")
    if "sentences_per_s" in metrics:
        lines.append(f"decoding {metrics['sentences_per_s']} sentences/s "
                     f"({metrics['decode_seconds']} s)")
    lines += [f"{metrics['signature']}", "",
              "source length  sentences    BLEU  |  lines  BLEU 1-ref"]
    for row in metrics["by_length"]:
        lines.append(f"{row['lengths']:>13}  {row['n']:>9}  {row['bleu']:6.2f}  |  "
                     f"{row.get('lines', ''):>5}  {row.get('bleu_single_ref', float('nan')):6.2f}")
    return "\n".join(lines)
