"""The 2018 IMDB self-attention model: attnkit vs Keras 3 (TF and torch), training and inference.

Every row runs in its own subprocess (so peak RSS is that framework's alone) on identical integer
inputs: ``--samples`` reviews of 100 ids in ``[1, 30000)``, padded at the start, random 0/1 labels
(numpy seed 0). Their lengths (``--lengths``) are by default those of the IMDB training reviews
under the 2018 pipeline, capped at 100 (``../shared/data/imdb/train.jsonl.gz``: 88% are cut to
100, the mean is 96); ``uniform`` draws them from 10..100 (mean 55), which flatters the masked
rows, and is what runs when the IMDB file is absent (the table says which). Each trains the same
model - Embedding(30000, 128), sinusoidal positions (cos_sin, summed), 8x16-head self-attention
without bias or output projection, global max pooling, Dropout(0.5), Dense(1, sigmoid) - with
Adam(1e-3), binary cross-entropy, batch 64, then predicts.

Rows (``--rows``, in the order a round runs them): ``float32``, attnkit in float32 with the
memory settings the ``attnkit`` command starts with (`attnkit.allocator.reuse_freed_memory`:
glibc keeps freed blocks for the next step); ``keras-tf``, Keras 3 on TensorFlow;
``malloc-defaults``, attnkit float32 with glibc's defaults; ``amp``, attnkit with ``--amp auto``
(bf16 autocast where this CPU has native bf16, as ``attnkit sentiment train`` decides; elsewhere
that is float32 and the row says so instead of running again); ``nomask``, attnkit without
masking (the 2018 model's own work, padding included); ``keras-torch``, Keras 3 on torch.

Interleaved rounds (``--rounds``, default 5). Round ``r`` runs every row once, each in a fresh
subprocess, attnkit float32 and Keras/TF first and back to back; the ratios are taken within a
round (attnkit float32's samples/s over Keras/TF's of the same round), and the run reports
their median over rounds and their spread (max / min over rounds). Why: on a shared virtual
machine the CPU's speed drifts over minutes (one process's passes over the same reviews have
moved from 2,100 to 4,900 samples/s), so one run of each framework in turn, as before, gave
ratios from 0.91x to 2.55x; timed within a minute of each other, both frameworks see the same
machine. A fresh process per row and round rather than one long-lived worker per framework
fed round by round: each round is then a whole replicate (start-up, warm-up, the allocator's
and the thread pools' state), peak RSS stays that framework's alone, and no idle worker holds
memory or threads while the other runs; the cost is the start-ups, a few seconds a row.
Timing only the rows the ratios compare, ``--rows float32,keras-tf``, takes about a minute a
round at 2 threads.

Fair timing: every framework gets the same CPU thread count (each of ``--threads``, e.g. ``1,2``
for one run at 1 and at 2 threads; torch ``set_num_threads``, TensorFlow intra- and inter-op
pools, ``OMP_NUM_THREADS``). A warm-up (5 batches, not timed) absorbs tracing and allocation.

* Training: one epoch with a timestamp after every batch, cut into windows of
  ``--window-batches`` batches; samples/s is the median window's (robust to other processes on
  a shared CPU). attnkit uses the trainer's optimizer (``build_optimizer``: fused AdamW with
  weight decay 0 = Adam).
* Inference: ``--infer-reps`` passes over the first ``--infer-samples`` reviews, batch 64, in
  eval mode; samples/s is the median pass's. Keras: ``model.predict``; attnkit:
  ``SentimentClassifier.logits_by_length`` (the reviews in length order, no attention weights).

attnkit's masked rows skip padding (reviews are encoded in length groups, each cut to its
longest review), which the 2018 model cannot do; the "no mask" row does the same work as Keras.
The last line is JSON: the machine, the rows, and per thread count ``train_vs_keras_tf`` and
``infer_vs_keras_tf`` (medians over rounds of attnkit float32 / Keras on TensorFlow),
``train_spread`` and ``infer_spread``, every row's median samples/s, its median ratio to
Keras/TF and its peak RSS, and ``rounds``: every round's ratios and samples/s.

Usage:
    ```
    .venv/bin/python benchmarks/imdb_vs_keras.py [--samples 25000] [--threads 1,2]
        [--rounds 5] [--rows all|float32,keras-tf,...] [--lengths imdb|uniform|PATH.jsonl.gz]
        [--window-batches 20] [--infer-samples 6400] [--infer-reps 3] [--keras-python PY]
    ```

Keras rows need ``keras`` and ``tensorflow`` (the ``bench`` extra; ``torch`` too for Keras on
torch) in ``--keras-python`` (default: ``.venv-bench/bin/python`` if present, else this
interpreter); missing ones print "not installed".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

VOCAB, MAXLEN, DIM, HEADS, HEAD_DIM, BATCH = 30000, 100, 128, 8, 16, 64
REPO = Path(__file__).resolve().parents[1]
IMDB_TRAIN = REPO.parent / "shared" / "data" / "imdb" / "train.jsonl.gz"


def imdb_lengths(path: Path) -> np.ndarray:
    """Words per review of an IMDB JSON Lines file (the 2018 tokenizer), capped at ``MAXLEN``."""
    sys.path.insert(0, str(REPO / "src"))
    from attnkit.data.classification_text import WordTokenizer
    from attnkit.data.imdb import load_split

    tokenizer = WordTokenizer()
    return np.array([min(len(tokenizer.tokenize(r.text)), MAXLEN)
                     for r in load_split(path, "train")], dtype=np.int64)


def draw_lengths(n: int, review_lengths: np.ndarray | None = None) -> np.ndarray:
    """``n`` lengths (seeded): drawn from ``review_lengths``, or uniform in 10..MAXLEN."""
    rng = np.random.default_rng(1)
    if review_lengths is None:
        return rng.integers(10, MAXLEN + 1, size=n)
    return rng.choice(review_lengths, size=n)


def make_inputs(n: int, review_lengths: np.ndarray | None = None):
    """``n`` reviews: ids ``[n, MAXLEN]`` padded at the start, lengths ``[n]`` (see
    `draw_lengths`), labels ``[n]``."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1, VOCAB, size=(n, MAXLEN), dtype=np.int64)
    lengths = draw_lengths(n, review_lengths)
    for i, n_real in enumerate(lengths):
        ids[i, : MAXLEN - n_real] = 0  # Keras default: padding at the start
    labels = rng.integers(0, 2, size=n).astype(np.float32)
    return ids, lengths.astype(np.int64), labels


def busy_seconds(stat_line: str, ticks_per_s: float = 100.0) -> float:
    """CPU seconds spent busy by all processes, from the ``cpu`` line of /proc/stat (user,
    nice, system, irq, softirq and steal; not idle or iowait)."""
    fields = [float(v) for v in stat_line.split()[1:]]
    busy = sum(fields[i] for i in (0, 1, 2, 5, 6, 7) if i < len(fields))
    return busy / ticks_per_s


class OthersMeter:
    """Share of the machine's CPUs that *other* processes used while it ran (0..1; None where
    /proc/stat is missing): a timing taken while a neighbour computed is suspect."""

    def __init__(self) -> None:
        self.start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                line = f.readline()
        except OSError:
            return None
        own = resource.getrusage(resource.RUSAGE_SELF)
        ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        return (busy_seconds(line, ticks), own.ru_utime + own.ru_stime, time.perf_counter())

    def share(self) -> float | None:
        end = self._sample()
        if self.start is None or end is None:
            return None
        busy, own, wall = (b - a for a, b in zip(self.start, end, strict=True))
        if wall < 1.0:  # /proc/stat counts 10 ms ticks: shorter spans say nothing
            return None
        return min(1.0, max(0.0, busy - own) / (wall * (os.cpu_count() or 1)))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def summarize(ends: list[float], start: float, n: int, window_batches: int) -> dict:
    """Per-batch end times -> epoch seconds and the median window's samples/s (windows of
    ``window_batches`` consecutive batches)."""
    stamps = [start] + ends
    rates = []
    for a in range(0, len(ends), window_batches):
        b = min(a + window_batches, len(ends))
        if b - a == window_batches or not rates:  # a short last window only if it is alone
            samples = min(b * BATCH, n) - a * BATCH
            rates.append(samples / (stamps[b] - stamps[a]))
    seconds = ends[-1] - start
    return {"seconds": seconds, "epoch_samples_per_s": n / seconds,
            "samples_per_s": float(np.median(rates)), "windows": len(rates)}


def median_rate(n: int, seconds: list[float]) -> float:
    """Samples/s of the median of several timed passes over ``n`` samples."""
    return n / float(np.median(seconds))


def run_attnkit(n: int, mode: str, threads: int, window_batches: int,
                review_lengths: np.ndarray | None, infer_n: int, infer_reps: int) -> dict:
    """``mode``: ``"float32"``, ``"amp"`` (the ``--amp auto`` choice), ``"nomask"``, or
    ``"float32-malloc-defaults"`` (float32 without the command's memory settings)."""
    import torch

    sys.path.insert(0, str(REPO / "src"))
    from attnkit.allocator import reuse_freed_memory

    if mode != "float32-malloc-defaults":
        reuse_freed_memory()     # as the attnkit command does at start
    from attnkit.models.sentiment import SentimentClassifier, SentimentConfig
    from attnkit.training import TrainConfig
    from attnkit.training.amp import autocast, resolve_amp
    from attnkit.training.trainer import build_optimizer

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cpu = torch.device("cpu")
    amp = mode == "amp" and resolve_amp("auto", cpu)
    if mode == "amp" and not amp:
        return {"same_as_float32": True}
    ids, lengths, labels = (torch.from_numpy(a) for a in make_inputs(n, review_lengths))
    model = SentimentClassifier(SentimentConfig.keras2018(mask_padding=mode != "nomask"))
    # The trainer's own optimizer (AdamW, weight decay 0 = Adam), as `attnkit sentiment train`.
    opt = build_optimizer(model, TrainConfig(lr=1e-3, weight_decay=0.0))
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def step(s: int) -> None:
        opt.zero_grad(set_to_none=True)
        with autocast(amp, cpu):
            logits = model(ids[s:s + BATCH], lengths[s:s + BATCH])
        loss = loss_fn(logits.float(), labels[s:s + BATCH])
        loss.backward()
        opt.step()

    for s in range(0, 5 * BATCH, BATCH):
        step(s)
    ends = []
    start = time.perf_counter()
    for s in range(0, n, BATCH):
        step(s)
        ends.append(time.perf_counter())
    result = summarize(ends, start, n, window_batches)
    model.eval()
    infer_ids, infer_lengths = ids[:infer_n], lengths[:infer_n]
    with autocast(amp, cpu):
        model.logits_by_length(ids[:5 * BATCH], lengths[:5 * BATCH], batch_size=BATCH)
        passes = []
        for _ in range(infer_reps):
            start = time.perf_counter()
            model.logits_by_length(infer_ids, infer_lengths, batch_size=BATCH)
            passes.append(time.perf_counter() - start)
    return {**result, "infer_samples_per_s": median_rate(len(infer_ids), passes),
            "peak_rss_mb": peak_rss_mb(), "threads": torch.get_num_threads(), "bf16": amp}


def _keras_model(keras):
    ops = keras.ops

    class PositionEmbedding(keras.layers.Layer):
        """The 2018 layer in sum mode: cos(t w_i) then sin(t w_i), added to the input."""

        def call(self, x):
            t = ops.cast(ops.arange(ops.shape(x)[1]), "float32")
            inv = 1.0 / ops.power(10000.0, 2.0 * ops.cast(ops.arange(DIM // 2), "float32") / DIM)
            angles = t[:, None] * inv[None, :]
            return x + ops.concatenate([ops.cos(angles), ops.sin(angles)], axis=-1)[None]

    class Attention(keras.layers.Layer):
        """2018 ``Attention(nb_head, size_per_head)``: Q/K/V projections, no bias/out proj."""

        def build(self, input_shape):
            for name in ("wq", "wk", "wv"):
                setattr(self, name, self.add_weight(name=name, shape=(DIM, HEADS * HEAD_DIM),
                                                    initializer="glorot_uniform"))

        def call(self, x):
            def heads(w):
                h = ops.reshape(ops.matmul(x, w), (-1, MAXLEN, HEADS, HEAD_DIM))
                return ops.transpose(h, (0, 2, 1, 3))

            q, k, v = heads(self.wq), heads(self.wk), heads(self.wv)
            scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / HEAD_DIM ** 0.5
            out = ops.matmul(ops.softmax(scores, axis=-1), v)
            return ops.reshape(ops.transpose(out, (0, 2, 1, 3)), (-1, MAXLEN, HEADS * HEAD_DIM))

    inp = keras.Input(shape=(MAXLEN,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, DIM)(inp)
    x = PositionEmbedding()(x)
    x = Attention()(x)
    x = keras.layers.GlobalMaxPooling1D()(x)
    x = keras.layers.Dropout(0.5)(x)
    out = keras.layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(inp, out)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy")
    return model


def run_keras(n: int, threads: int, window_batches: int, review_lengths: np.ndarray | None,
              infer_n: int, infer_reps: int) -> dict:
    try:
        import keras
    except ImportError:
        return {"error": "not installed"}
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    elif backend == "torch":
        import torch

        torch.set_num_threads(threads)
    keras.utils.set_random_seed(0)
    ids, _, labels = make_inputs(n, review_lengths)
    ids = ids.astype(np.int32)
    model = _keras_model(keras)
    params = model.count_params()
    model.fit(ids[: 5 * BATCH], labels[: 5 * BATCH], batch_size=BATCH, epochs=1, verbose=0,
              shuffle=False)
    ends: list[float] = []
    stamp = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: ends.append(time.perf_counter()))
    start = time.perf_counter()
    model.fit(ids, labels, batch_size=BATCH, epochs=1, verbose=0, shuffle=False,
              callbacks=[stamp])
    result = summarize(ends, start, n, window_batches)
    model.predict(ids[: 5 * BATCH], batch_size=BATCH, verbose=0)
    passes = []
    for _ in range(infer_reps):
        start = time.perf_counter()
        model.predict(ids[:infer_n], batch_size=BATCH, verbose=0)
        passes.append(time.perf_counter() - start)
    return {**result, "infer_samples_per_s": median_rate(min(infer_n, n), passes),
            "peak_rss_mb": peak_rss_mb(), "params": params, "version": keras.__version__,
            "threads": threads}


def worker(name: str, n: int, threads: int, window_batches: int, lengths_file: str,
           infer_n: int, infer_reps: int) -> dict:
    # The parent read the lengths: the IMDB texts would otherwise count in this peak RSS.
    review_lengths = np.load(lengths_file) if lengths_file else None
    meter = OthersMeter()
    if name.startswith("attnkit-"):
        result = run_attnkit(n, name.removeprefix("attnkit-"), threads, window_batches,
                             review_lengths, infer_n, infer_reps)
    else:
        result = run_keras(n, threads, window_batches, review_lengths, infer_n, infer_reps)
    return {**result, "others_cpu": meter.share()}


# (key for --rows, label in the table and the JSON, worker name, which Python, KERAS_BACKEND),
# in the order a round launches them: the two rows the ratios compare first, back to back.
ROWS = (("float32", "attnkit float32", "attnkit-float32", "self", None),
        ("keras-tf", "Keras 3 / tensorflow", "keras", "keras", "tensorflow"),
        ("malloc-defaults", "attnkit float32, glibc malloc defaults",
         "attnkit-float32-malloc-defaults", "self", None),
        ("amp", "attnkit --amp auto", "attnkit-amp", "self", None),
        ("nomask", "attnkit no mask (as 2018)", "attnkit-nomask", "self", None),
        ("keras-torch", "Keras 3 / torch", "keras", "keras", "torch"))
BASE, KERAS_TF = "attnkit float32", "Keras 3 / tensorflow"


def parse_threads(text: str) -> list[int]:
    """``"1,2"`` -> ``[1, 2]``: the thread counts of one run, each >= 1, no repeats."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise ValueError(f"--threads needs distinct counts >= 1 like 1,2; got {text!r}")
    return counts


def parse_rows(text: str) -> list[tuple]:
    """``"float32,keras-tf"`` -> those entries of `ROWS`, in `ROWS` order; ``"all"`` -> all."""
    keys = [part.strip() for part in text.split(",") if part.strip()]
    if keys == ["all"]:
        return list(ROWS)
    known = [row[0] for row in ROWS]
    unknown = [k for k in keys if k not in known]
    if not keys or unknown or len(set(keys)) != len(keys):
        raise ValueError(f"--rows needs distinct names among {', '.join(known)} (or 'all'); "
                         f"got {text!r}")
    return [row for row in ROWS if row[0] in keys]


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def _spread(values: list[float]) -> float | None:
    """max / min of positive values (1.0 = every round agreed); None without any."""
    return round(max(values) / min(values), 3) if values else None


def summary(results: dict[int, list[dict[str, dict]]]) -> dict[str, dict]:
    """Per thread count: attnkit float32 against Keras on TensorFlow, round by round.

    ``results[threads][r][row label]`` is round ``r``'s worker dict for that row
    (``samples_per_s``, ``infer_samples_per_s``, ``peak_rss_mb``; or ``error``; or
    ``same_as_float32``, which stands for the same round's float32 row). In every round each
    row's training and inference samples/s are divided by Keras/TF's of that round;
    ``train_vs_keras_tf`` and ``infer_vs_keras_tf`` are the medians of attnkit float32's
    ratios, ``train_spread`` and ``infer_spread`` their max / min over the rounds (None where
    no round has both rows). Per row: the medians over rounds of its samples/s and of its
    ratios (``x_keras_tf``), the largest peak RSS and other processes' CPU share, its errors.
    """
    out = {}
    for threads, rounds in results.items():
        per_round, by_row = [], {}
        for rows in rounds:
            rows = {name: (rows.get(BASE, {"error": "no float32 row"})
                           if r.get("same_as_float32") else r) for name, r in rows.items()}
            ok = {name: r for name, r in rows.items() if "error" not in r}
            keras = ok.get(KERAS_TF)
            entry = {"train_samples_per_s": {}, "infer_samples_per_s": {}, "others_cpu": {}}
            for name, r in rows.items():
                row = by_row.setdefault(name, {"train": [], "infer": [], "train_x": [],
                                               "infer_x": [], "rss": [], "others": [],
                                               "errors": []})
                if name not in ok:
                    row["errors"].append(r["error"])
                    continue
                for key, short in (("samples_per_s", "train"), ("infer_samples_per_s",
                                                                 "infer")):
                    row[short].append(r[key])
                    entry[f"{short}_samples_per_s"][name] = round(r[key], 1)
                    if keras is not None:
                        row[f"{short}_x"].append(r[key] / keras[key])
                row["rss"].append(r["peak_rss_mb"])
                row["others"].append(r.get("others_cpu"))
                entry["others_cpu"][name] = r.get("others_cpu")
            both = BASE in ok and keras is not None
            for short, key in (("train", "samples_per_s"), ("infer", "infer_samples_per_s")):
                entry[f"{short}_vs_keras_tf"] = (round(ok[BASE][key] / keras[key], 3)
                                                 if both else None)
            per_round.append(entry)
        train = [e["train_vs_keras_tf"] for e in per_round if e["train_vs_keras_tf"]]
        infer = [e["infer_vs_keras_tf"] for e in per_round if e["infer_vs_keras_tf"]]

        def rounded(value: float | None, digits: int) -> float | None:
            return None if value is None else round(value, digits)

        out[str(threads)] = {
            "train_vs_keras_tf": rounded(_median(train), 3),
            "infer_vs_keras_tf": rounded(_median(infer), 3),
            "train_spread": _spread(train), "infer_spread": _spread(infer),
            "rounds_compared": len(train),
            "train_samples_per_s": {name: rounded(_median(r["train"]), 1)
                                    for name, r in by_row.items()},
            "infer_samples_per_s": {name: rounded(_median(r["infer"]), 1)
                                    for name, r in by_row.items()},
            "train_x_keras_tf": {name: rounded(_median(r["train_x"]), 3)
                                 for name, r in by_row.items()},
            "infer_x_keras_tf": {name: rounded(_median(r["infer_x"]), 3)
                                 for name, r in by_row.items()},
            "peak_rss_mb": {name: round(max(r["rss"])) for name, r in by_row.items()
                            if r["rss"]},
            "others_cpu_max": {name: max((v for v in r["others"] if v is not None),
                                         default=None) for name, r in by_row.items()},
            "errors": {name: r["errors"] for name, r in by_row.items() if r["errors"]},
            "rounds": per_round,
        }
    return out


def launch(worker_name: str, args: argparse.Namespace, threads: int, python: str,
           backend: str | None, lengths_file: str) -> dict:
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    if backend:
        env["KERAS_BACKEND"] = backend
    proc = subprocess.run([python, __file__, "--worker", worker_name, "--samples",
                           str(args.samples), "--threads", str(threads),
                           "--window-batches", str(args.window_batches),
                           "--infer-samples", str(args.infer_samples),
                           "--infer-reps", str(args.infer_reps),
                           "--lengths-file", lengths_file],
                          capture_output=True, text=True, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        if "No module named" in tail:
            return {"error": "not installed"}
        return {"error": f"failed: {tail[:120]}"}
    return json.loads(lines[-1])


def _percent(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.0f}%"


def _num(value: float | None, fmt: str, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{fmt}}"


def print_table(threads: int, labels: list[str], out: dict) -> None:
    """One thread count's `summary`: per row the medians over rounds, then round by round."""
    print(f"{threads} thread(s), medians over {len(out['rounds'])} round(s) "
          "(x Keras/TF: median of the same round's ratios):")
    print(f"  {'framework':<38} {'train/s':>8} {'x Keras/TF':>10} {'infer/s':>8} "
          f"{'x Keras/TF':>10} {'peak RSS MB':>12} {'others':>7}")
    for name in labels:
        if name in out["errors"] and name not in out["peak_rss_mb"]:
            print(f"  {name:<38} {out['errors'][name][0]}")
            continue
        print(f"  {name:<38} {_num(out['train_samples_per_s'][name], '.0f', 8)} "
              f"{_num(out['train_x_keras_tf'][name], '.2f', 10)} "
              f"{_num(out['infer_samples_per_s'][name], '.0f', 8)} "
              f"{_num(out['infer_x_keras_tf'][name], '.2f', 10)} "
              f"{out['peak_rss_mb'][name]:>12} {_percent(out['others_cpu_max'][name]):>7}"
              + (f"  (failed in {len(out['errors'][name])} round(s))"
                 if name in out["errors"] else ""))
    print(f"  attnkit float32 / Keras/TF: training {_num(out['train_vs_keras_tf'], '.2f', 0)}x "
          f"(spread {_num(out['train_spread'], '.2f', 0)}), inference "
          f"{_num(out['infer_vs_keras_tf'], '.2f', 0)}x (spread "
          f"{_num(out['infer_spread'], '.2f', 0)}) over {out['rounds_compared']} round(s)")
    for r, entry in enumerate(out["rounds"], 1):
        rates = "; ".join(f"{name} {entry['train_samples_per_s'][name]:.0f} / "
                          f"{entry['infer_samples_per_s'][name]:.0f}"
                          for name in labels if name in entry["train_samples_per_s"])
        print(f"  round {r}: training {_num(entry['train_vs_keras_tf'], '.2f', 0)}x, inference "
              f"{_num(entry['infer_vs_keras_tf'], '.2f', 0)}x (train/s / infer/s: {rates})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=25000)
    bench_py = REPO / ".venv-bench" / "bin" / "python"
    parser.add_argument("--keras-python",
                        default=str(bench_py) if bench_py.exists() else sys.executable)
    parser.add_argument("--threads", default="1,2",
                        help="CPU thread counts, each for every framework (default 1,2)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="interleaved rounds: each runs every row once, in its own process "
                             "(default 5)")
    parser.add_argument("--rows", default="all",
                        help="rows to run, comma-separated among "
                             + ", ".join(row[0] for row in ROWS)
                             + " (default all; the ratios need float32 and keras-tf)")
    parser.add_argument("--window-batches", type=int, default=20,
                        help="batches per timed training window; a worker reports its median "
                             "window")
    parser.add_argument("--infer-samples", type=int, default=6400,
                        help="reviews per timed inference pass (default 6400)")
    parser.add_argument("--infer-reps", type=int, default=3,
                        help="timed inference passes; the median is reported (default 3)")
    parser.add_argument("--lengths", default="imdb",
                        help="review lengths: 'imdb' (the shared IMDB train split; uniform if "
                             "it is absent), 'uniform' (10..100) or an IMDB .jsonl(.gz) path")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--lengths-file", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        thread_counts = parse_threads(args.threads)
        rows = parse_rows(args.rows)
    except ValueError as e:
        parser.error(str(e))
    if args.window_batches < 1 or args.samples < BATCH or args.infer_samples < BATCH \
            or args.infer_reps < 1 or args.rounds < 1:
        parser.error(f"need --window-batches >= 1, --samples >= {BATCH}, --infer-samples >= "
                     f"{BATCH}, --infer-reps >= 1, --rounds >= 1")
    if args.worker:
        print(json.dumps(worker(args.worker, args.samples, thread_counts[0],
                                args.window_batches, args.lengths_file,
                                min(args.infer_samples, args.samples), args.infer_reps)))
        return
    source = {"imdb": IMDB_TRAIN}.get(args.lengths, Path(args.lengths))
    if args.lengths == "uniform":
        review_lengths, described = None, "uniform in 10..100"
    elif args.lengths == "imdb" and not source.exists():
        review_lengths, described = None, f"uniform in 10..100 ({source} not found)"
    elif not source.is_file():
        parser.error(f"--lengths {source}: no such file")
    else:
        review_lengths = imdb_lengths(source)
        described = f"drawn from the {len(review_lengths)} reviews of {source}"
    results: dict[int, list[dict[str, dict]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        lengths_file = ""
        if review_lengths is not None:
            lengths_file = str(Path(tmp) / "lengths.npy")
            np.save(lengths_file, review_lengths)
        for threads in thread_counts:
            results[threads] = []
            for r in range(args.rounds):
                results[threads].append({
                    label: launch(worker_name, args, threads,
                                  sys.executable if python == "self" else args.keras_python,
                                  backend, lengths_file)
                    for _, label, worker_name, python, backend in rows})
                print(f"{threads} thread(s): round {r + 1} of {args.rounds} done", flush=True)
    mean_length = float(np.mean(draw_lengths(args.samples, review_lengths)))
    sys.path.insert(0, str(REPO / "src"))
    from attnkit.machine import machine_info, machine_line

    info = machine_info()
    print(f"machine: {machine_line({**info, 'threads': args.threads})} (each framework at "
          f"each thread count; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} "
          "at the end)")
    print(f"review lengths {described} (capped at {MAXLEN}; mean {mean_length:.1f} real ids)")
    print("others = the largest share of the CPUs that other processes used while the row ran "
          "(its timings are suspect above a few %)")
    print(f"training: one epoch, {args.samples} samples, batch {BATCH}, maxlen {MAXLEN}; "
          f"samples/s = median of windows of {args.window_batches} batches (warm-up excluded). "
          f"inference: {min(args.infer_samples, args.samples)} samples, batch {BATCH}, "
          f"median of {args.infer_reps} passes. {args.rounds} interleaved round(s), each row "
          "in its own process, in the order " + ", ".join(row[0] for row in rows))
    out = summary(results)
    labels = [row[1] for row in rows]
    for threads in thread_counts:
        print_table(threads, labels, out[str(threads)])
    print(json.dumps({"machine": info, "rounds": args.rounds, "rows": labels, "threads": out}))


if __name__ == "__main__":
    main()
