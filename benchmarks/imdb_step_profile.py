"""Where one training step of the 2018 IMDB model spends its time, by part of the model.

Runs the step as ``attnkit sentiment train --preset keras2018`` does (the app's dataset and
``collate`` through a ``DataLoader``, ``binary_cross_entropy_with_logits``, the trainer's fused
AdamW) on the benchmark's inputs (``imdb_vs_keras.make_inputs``: IMDB train lengths, padding at
the start, batch 64), under ``torch.profiler`` for ``--steps`` steps after a warm-up, and prints
milliseconds per step by part:

* data loading: the ``DataLoader`` and ``collate`` (the app's batch path);
* embedding + positions: the lookup, the sinusoids and their sum; its gradient (the dense
  ``[vocab, dim]`` embedding gradient) is its own row;
* Q/K/V projections: the packed projection and its backward (weight and input gradients);
* attention heads: the score and context matmuls of the 8 heads (forward and backward);
* softmax with masks: the softmax, its masks, scale and backward;
* pooling: the max over time (and the pooled features' path in the backward);
* classifier + loss: dropout, the dense unit, the loss and their backward;
* optimizer step: ``zero_grad`` and AdamW;
* other: everything else (length groups, reshapes, copies, Python).

Each profiled operator's *self* time goes to one part, by the operator and the model step it
runs under (see :func:`part_of`); the rows add up to the profiled step. attnkit's fused
attention-and-pooling kernel labels its projection, heads, softmax and max
(``attnkit.attention.pooling``); the fused SDPA kernel that versions up to 8734ff9 ran cannot be
split, so there "attention heads" includes its softmax and masks.

Usage::

    .venv/bin/python benchmarks/imdb_step_profile.py [--threads 2] [--steps 20] [--json]
        [--detail]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "src"))

PARTS = ("data loading", "embedding + positions", "embedding gradient", "Q/K/V projections",
         "attention heads", "softmax with masks", "pooling", "classifier + loss",
         "optimizer step", "other")

# Autograd nodes of the backward, by part (the rest: by the operators under them).
_BACKWARD_PARTS = {
    "EmbeddingBackward0": "embedding gradient",
    "AddBackward0": "embedding + positions",
    "MmBackward0": "Q/K/V projections", "UnsafeViewBackward0": "Q/K/V projections",
    "AddmmBackward0": "classifier + loss", "NativeDropoutBackward0": "classifier + loss",
    "SqueezeBackward0": "classifier + loss", "SqueezeBackward1": "classifier + loss",
    "BinaryCrossEntropyWithLogitsBackward0": "classifier + loss",
    "MaxBackward0": "pooling", "MaxBackward1": "pooling", "MaskedFillBackward0": "pooling",
    "MulBackward0": "pooling",  # padded positions zeroed before the max
}
# Inside the attention (forward, or its backward nodes): operator -> part.
_SOFTMAX_OPS = {"_softmax", "softmax", "_softmax_backward_data", "masked_fill_", "masked_fill",
                "add_", "any", "all", "bitwise_not", "logical_not", "where", "sub", "sum",
                "lt", "ge", "flip"}
_POOL_OPS = {"max", "amax", "max_pool"}


def part_of(op: str, scope: str) -> str:
    """The part of the model an operator's self time belongs to.

    Args:
        op: the operator's name without the ``aten::`` prefix (e.g. ``"mm"``).
        scope: the innermost model step it ran under: a label of this script (``"data"``,
            ``"embed"``, ``"proj"``, ``"attend"``, ``"head"``, ``"optimizer"``) or an autograd
            node of the backward (``"EmbeddingBackward0"``, ...).
    """
    labels = {"data": "data loading", "optimizer": "optimizer step", "embed":
              "embedding + positions", "proj": "Q/K/V projections", "head": "classifier + loss",
              # the labels of attnkit.attention.pooling's kernel
              "attnkit.qkv_projection": "Q/K/V projections",
              "attnkit.attention_heads": "attention heads", "attnkit.softmax": "softmax with masks",
              "attnkit.max_pool": "pooling"}
    if scope in labels:
        return labels[scope]
    if scope in _BACKWARD_PARTS:
        return _BACKWARD_PARTS[scope]
    attention_node = scope.startswith(("Softmax", "Bmm", "Baddbmm", "TransposeBackward",
                                       "PermuteBackward", "UnbindBackward", "ExpandBackward",
                                       "CloneBackward", "SelectBackward", "ReshapeAlias"))
    if scope == "attend" or "Attention" in scope or attention_node:
        if op in _SOFTMAX_OPS or scope.startswith("Softmax"):
            return "softmax with masks"
        if op in _POOL_OPS:
            return "pooling"
        if "flash_attention" in op:
            return "attention heads"
        if op in ("bmm", "baddbmm", "mm", "matmul", "gather", "scatter_add_", "mul"):
            return "attention heads"
        return "other"
    return "other"


def _scope_of(event) -> str:
    """The innermost labelled model step (or autograd node) at or above a profiler event (a
    label's own self time, the Python and dispatch between its operators, is its step's)."""
    node = event if event.name.startswith(("step:", "attnkit.")) else event.cpu_parent
    while node is not None:
        name = node.name
        if name.startswith("step:"):
            return name[5:]
        if name.startswith("attnkit."):
            return name
        if name.startswith("autograd::engine::evaluate_function: "):
            return name.split(": ", 1)[1]
        if name.startswith("Optimizer."):
            return "optimizer"
        node = node.cpu_parent
    return "other"


def profile_steps(threads: int, steps: int, samples: int = 64 * 40,
                  detail: dict[tuple[str, str], float] | None = None
                  ) -> tuple[dict[str, float], float | None]:
    """Milliseconds per training step by part (:data:`PARTS`), measured under the profiler, and
    the share of the CPUs that other processes used meanwhile (None where unknown); ``detail``
    (if given) receives the ms/step of every (operator, scope) counted as "other".
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    import imdb_vs_keras as bench
    from attnkit.data.review_pipeline import EncodedReviews, collate
    from attnkit.models.sentiment import SentimentClassifier, SentimentConfig
    from attnkit.training import TrainConfig
    from attnkit.training.trainer import build_optimizer

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    lengths_path = bench.IMDB_TRAIN
    review_lengths = bench.imdb_lengths(lengths_path) if lengths_path.exists() else None
    ids, lengths, labels = (torch.from_numpy(a) for a in bench.make_inputs(samples,
                                                                             review_lengths))
    data = EncodedReviews(ids, lengths, labels)
    batches = [list(range(s, min(s + bench.BATCH, samples)))
               for s in range(0, samples, bench.BATCH)]
    model = SentimentClassifier(SentimentConfig.keras2018())
    opt = build_optimizer(model, TrainConfig(lr=1e-3, weight_decay=0.0))
    _label_model_steps(model, record_function)

    def run(n: int) -> None:
        loader = torch.utils.data.DataLoader(data, batch_sampler=batches[:n], collate_fn=collate)
        it = iter(loader)
        for _ in range(n):
            with record_function("step:data"):
                b_ids, b_lengths, b_labels = next(it)
            opt.zero_grad(set_to_none=True)
            logits = model(b_ids, b_lengths)
            with record_function("step:head"):
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, b_labels)
            loss.backward()
            opt.step()

    run(5)
    meter = bench.OthersMeter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run(steps)
    others = meter.share()
    totals: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if event.cpu_parent is None and event.name.startswith("ProfilerStep"):
            continue
        op = event.name.removeprefix("aten::")
        part = part_of(op, _scope_of(event))
        totals[part] += event.self_cpu_time_total / 1000.0
        if part == "other" and detail is not None:
            key = (op, _scope_of(event))
            detail[key] = detail.get(key, 0.0) + event.self_cpu_time_total / 1000.0 / steps
    parts = {part: totals.get(part, 0.0) / steps for part in PARTS}
    return parts, others


def _label_model_steps(model, record_function) -> None:
    """Wrap the model's steps in ``record_function("step:...")`` so that their operators can be
    told apart: the embedding and positions, the attention layers (their projections apart) and
    the classifier. Instance attributes only: the class is untouched."""
    import functools

    def label(obj, method: str, name: str) -> None:
        inner = getattr(obj, method)

        @functools.wraps(inner)
        def wrapped(*args, **kwargs):
            with record_function(f"step:{name}"):
                return inner(*args, **kwargs)

        setattr(obj, method, wrapped)

    label(model, "_lookup", "embed")
    label(model, "_embed", "embed")
    for layer in model.layers:
        for method in ("forward", "max_pool"):
            if hasattr(layer, method):
                label(layer, method, "attend")
        label(layer, "_project", "proj")
    label(model.classifier, "forward", "head")
    label(model.dropout, "forward", "head")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="also print a JSON line")
    parser.add_argument("--detail", action="store_true",
                        help="also list the operators counted as 'other'")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from attnkit.machine import machine_line

    detail: dict[tuple[str, str], float] = {}
    parts, others = profile_steps(args.threads, args.steps,
                                  detail=detail if args.detail else None)
    total = sum(parts.values())
    print(f"machine: {machine_line()}")
    share = "n/a" if others is None else f"{100 * others:.0f}%"
    print(f"keras2018 training step, batch 64, IMDB lengths, {args.steps} profiled steps "
          f"after 5 warm-up; ms per step (profiler self time); other processes used {share} "
          "of the CPUs meanwhile")
    print(f"{'part':<24} {'ms/step':>8} {'share':>7}")
    for part, ms in parts.items():
        print(f"{part:<24} {ms:>8.2f} {ms / total:>7.1%}")
    print(f"{'total':<24} {total:>8.2f}")
    if args.detail:
        print("'other' by operator (under model step or autograd node), ms/step:")
        for (op, scope), ms in sorted(detail.items(), key=lambda kv: -kv[1])[:15]:
            print(f"  {ms:6.2f}  {op}  ({scope})")
    if args.json:
        print(json.dumps({"ms_per_step": {k: round(v, 3) for k, v in parts.items()},
                          "total_ms": round(total, 3), "others_cpu": others}))


if __name__ == "__main__":
    main()
