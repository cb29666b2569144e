"""Sequence reversal with attention: a fourth attnkit app, in one file.

The task: read digits (``3 1 4 1 5``) and write them backwards (``5 1 4 1 3``). A bi-GRU
encoder-decoder with additive attention learns it in seconds, and its attention shows what
reversal looks like: an anti-diagonal, each output digit looking at its mirror position.

Installed (``pip install -e examples/reverse_app``), the package's entry point registers the
app in the group ``attnkit.apps``, and nothing else changes: ``attnkit reverse train``,
``eval``, ``predict --html`` and ``attnkit.apps.APPS["reverse"]`` all exist, the run folder
follows attnkit's rules (lock, resume, overwrite, seeds), and the contract test that every app
passes trains it too.

```bash
attnkit reverse train --out runs/rev --epochs 4          # about 20 s on 2 CPU cores
attnkit reverse eval --run runs/rev                       # exact-match accuracy
attnkit reverse predict --run runs/rev "3 1 4 1 5" --html rev.html
```

What an app writes is the five steps of `attnkit.apps.App` (configure, prepare, save, reload,
fit), ``load``, ``evaluation``, ``predictions`` and ``tiny``; the library parts do the rest:
`attnkit.models.build_model` (the network), `attnkit.training.Trainer` (training, checkpoints,
resume), `attnkit.decoding.decode_many` (greedy decoding with attention) and
`attnkit.viz.translation_page` (the page).
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnkit.apps import App, Evaluation, Loaded, Prediction, Prepared, TinyRun
from attnkit.apps.run_files import FORMAT, read_config, run_file
from attnkit.data.translation import TranslationDataset, collate_translation
from attnkit.data.vocab import Vocab
from attnkit.decoding import decode_many
from attnkit.errors import UsageError
from attnkit.fileio import write_json
from attnkit.models import build_model, config_from_dict, masked_cross_entropy
from attnkit.settings import Option, check_resume, split_options
from attnkit.training import LossOutput, TrainConfig, Trainer
from attnkit.training.distributed import checked_device
from attnkit.training.run_folder import load_model

DIGITS = list("0123456789")


@dataclass
class ReverseSettings:
    """Everything a run is made of. ``data`` is always ``"synthetic"`` (sequences drawn from
    the seed); budgets (``epochs``, ``max_minutes``) may change on a resume."""

    data: str = "synthetic"
    length: int = 8
    num_train: int = 3000
    hidden: int = 32
    seed: int = 0
    epochs: int = 4
    batch_size: int = 32
    lr: float = 3e-3
    patience: int = 0
    max_minutes: float | None = None
    device: str = "cpu"
    amp: bool | str = "auto"
    progress: bool = True
    train: TrainConfig = field(init=False)

    def __post_init__(self) -> None:
        if self.data not in (None, "synthetic"):
            raise UsageError(f"--data for reverse is 'synthetic', got {self.data!r}")
        if not 2 <= self.length <= 50:
            raise UsageError(f"--length must be from 2 to 50, got {self.length}")
        checked_device(self.device)
        try:
            self.train = TrainConfig(
                epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, seed=self.seed,
                device=self.device, max_minutes=self.max_minutes, amp=self.amp,
                progress=self.progress, early_stopping_patience=self.patience or None,
                select_metric="accuracy", select_mode="max")
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    def stored(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}


def sequences(n: int, length: int, seed: int) -> list[tuple[list[str], list[str]]]:
    """``n`` (digits, reversed digits) pairs of 2..``length`` digits, drawn from ``seed``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        src = rng.choices(DIGITS, k=rng.randint(2, length))
        out.append((src, src[::-1]))
    return out


def splits(s: ReverseSettings) -> dict[str, list[tuple[list[str], list[str]]]]:
    return {"train": sequences(s.num_train, s.length, s.seed),
            "valid": sequences(200, s.length, s.seed + 10_000),
            "test": sequences(200, s.length, s.seed + 20_000)}


@dataclass
class ReversePrepared(Prepared):
    vocab: Vocab | None = None
    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, list] = field(default_factory=dict)


@dataclass
class ReversalPrediction(Prediction):
    """Digits read backwards, with the attention ``[len(tokens), len(source_tokens)]``."""

    source_tokens: list[str]
    tokens: list[str]
    weights: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        return {"source": " ".join(self.source_tokens), "output": " ".join(self.tokens),
                "weights": self.weights.tolist()}

    def text_line(self, **show: Any) -> str:
        return " ".join(self.tokens)

    def figure(self):
        from attnkit.viz.heatmap import alignment_figure

        return alignment_figure(self.weights, self.source_tokens, self.tokens)

    @classmethod
    def page(cls, predictions, summary):
        from attnkit.viz import TranslationExample, translation_page

        return translation_page([TranslationExample(p.source_tokens, p.tokens, p.weights)
                                 for p in predictions if p.tokens], summary,
                                title="Reversal: where the model looked")


class ReverseApp(App):
    """Read digits, write them backwards."""

    name = "reverse"
    help = "reverse a sequence of digits (an example app)"
    description = "An attention encoder-decoder that writes digits backwards."
    inputs = "sequence"
    headline = ("accuracy",)
    options = (Option("--length", int, "the most digits per sequence (default 8)"),
               Option("--hidden", int, "GRU units (default 32)"),
               Option("--num-train", int, "training sequences (default 3000)"))
    examples = ("attnkit reverse train --out runs/rev",
                'attnkit reverse predict --run runs/rev "3 1 4 1 5" --html rev.html')

    def configure(self, given, out, stored):
        given = {k: v for k, v in given.items() if v is not None or k == "max_minutes"}
        names = {f.name for f in dataclasses.fields(ReverseSettings) if f.init}
        split_options(given, {"settings": names}, "reverse setting")
        if stored is None:
            return ReverseSettings(**{k: v for k, v in given.items() if k != "data" or v})
        kept = stored["settings"]
        changes = check_resume(kept, given, applied=("epochs", "max_minutes", "progress",
                                                       "device", "patience"))
        return ReverseSettings(**{**kept, **changes})

    def prepare(self, config, log):
        vocab = Vocab.build([DIGITS])
        model = {"arch": "rnn", "src_vocab": len(vocab), "tgt_vocab": len(vocab),
                 "emb_dim": 16, "hidden": config.hidden, "attention": "additive",
                 "pad_id": vocab.pad_id, "bos_id": vocab.bos_id, "eos_id": vocab.eos_id,
                 "unk_id": vocab.unk_id}
        return ReversePrepared(config, config.train, vocab=vocab, model=model,
                               data=splits(config))

    def save(self, prepared, out):
        prepared.vocab.to_json(out / "vocab.json")
        write_json(out / "config.json", self._metadata(prepared))

    def reload(self, config, out, log):
        stored = read_config(out, self.name)
        vocab = Vocab.from_json(run_file(out, "vocab.json", "the run's vocabulary"))
        return ReversePrepared(config, config.train, vocab=vocab, model=stored["model"],
                               data=splits(config))

    def _metadata(self, prepared):
        return {"app": self.name, "format": FORMAT, "data": "synthetic",
                "settings": prepared.config.stored(), "model": prepared.model}

    def fit(self, prepared, out, *, resume, log):
        vocab, model = prepared.vocab, build_model(config_from_dict(prepared.model))
        train = TranslationDataset([vocab.encode(s) for s, _ in prepared.data["train"]],
                                   [vocab.encode(t) for _, t in prepared.data["train"]])

        def loss_fn(m, batch):
            logits = m(batch["src"], batch["src_lengths"], batch["tgt_in"])
            return LossOutput(*masked_cross_entropy(logits, batch["tgt_out"],
                                                    pad_id=vocab.pad_id))

        def evaluate_fn(m):
            return {"accuracy": accuracy(m, vocab, prepared.data["valid"])}

        return Trainer(model, prepared.train, out, train_dataset=train,
                       collate_fn=functools.partial(collate_translation, pad_id=vocab.pad_id,
                                                    bos_id=vocab.bos_id, eos_id=vocab.eos_id),
                       loss_fn=loss_fn, evaluate_fn=evaluate_fn,
                       run_metadata=self._metadata(prepared)).fit(resume=resume)

    def load(self, run, *, weights="best", device=None, engine=None):
        run = Path(run)
        config = read_config(run, self.name)
        vocab = Vocab.from_json(run_file(run, "vocab.json", "the run's vocabulary"))
        model, device = load_model(lambda: build_model(config_from_dict(config["model"])), run,
                                   weights, device, str(run / "config.json"))
        return Loaded(run, self.name, model, vocab, config, device,
                      description=f"bi-GRU {config['model']['hidden']}, additive attention")

    def evaluation(self, loaded, data, *, report=0):
        if data not in (None, "synthetic"):
            raise UsageError("reverse evaluates on its own test sequences (no --data)")
        s = ReverseSettings(**loaded.config["settings"])
        test = splits(s)["test"]
        metrics = {"accuracy": accuracy(loaded.model, loaded.pipeline, test),
                   "examples": len(test)}
        page = None
        if report:
            shown = self.predictions(loaded, [" ".join(src) for src, _ in test[:abs(report)]])
            page = ReversalPrediction.page(shown, {**loaded.summary(), **metrics})
        return Evaluation(metrics, page)

    def predictions(self, loaded, inputs: Sequence[str], *, attention=None):
        if isinstance(inputs, str) or not inputs:
            raise UsageError("predict takes a list of digit sequences")
        vocab, sources = loaded.pipeline, [text.split() for text in inputs]
        # A model trained on sequences of at most `length` digits stops early on longer ones:
        # refused, rather than a shorter answer given as if it were the reversal.
        longest = loaded.config["settings"]["length"]
        for i, src in enumerate(sources, 1):
            if not src or any(d not in DIGITS for d in src):
                raise UsageError(f"sequence {i} must be digits separated by spaces")
            if len(src) > longest:
                raise UsageError(f"sequence {i} has {len(src)} digits; this run learnt "
                                 f"sequences of at most {longest} (train with --length "
                                 f"{len(src)} or more)")
        hyps = decode_many(loaded.model, [vocab.encode(s) for s in sources], need_weights=True)
        out = []
        for src, hyp in zip(sources, hyps, strict=True):
            keep = [k for k, i in enumerate(hyp.tokens) if i not in (vocab.bos_id, vocab.eos_id)]
            out.append(ReversalPrediction(src, [vocab.itos[hyp.tokens[k]] for k in keep],
                                          hyp.attention[keep].float().numpy()))
        return out

    def tiny(self, folder: Path) -> TinyRun:
        return TinyRun({"num_train": 200, "length": 5, "hidden": 16, "epochs": 2,
                        "progress": False}, ["1 2 3", "9 8 7 6"])


def accuracy(model, vocab: Vocab, pairs) -> float:
    """Exact match of greedy decoding on ``(digits, reversed)`` pairs."""
    hyps = decode_many(model, [vocab.encode(src) for src, _ in pairs], need_weights=False)
    return sum(vocab.decode(h.tokens) == tgt for h, (_, tgt) in zip(hyps, pairs, strict=True)
               ) / max(len(pairs), 1)


APP = ReverseApp()
__all__ = ["APP", "ReversalPrediction", "ReverseApp", "ReverseSettings"]
