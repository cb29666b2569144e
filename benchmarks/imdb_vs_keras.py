"""One training epoch of the 2018 IMDB self-attention model: attnkit vs Keras 3 (TF and torch).

Every row runs in its own subprocess (so peak RSS is that framework's alone) on identical integer
inputs: ``--samples`` reviews of 100 ids in ``[1, 30000)``, padded at the start, random 0/1 labels
(numpy seed 0). Their lengths (``--lengths``) are by default those of the IMDB training reviews
under the 2018 pipeline, capped at 100 (``../shared/data/imdb/train.jsonl.gz``: 88% are cut to
100, the mean is 96); ``uniform`` draws them from 10..100 (mean 55), which flatters the masked
rows, and is what runs when the IMDB file is absent (the table says which). Each trains the same
model - Embedding(30000, 128), sinusoidal positions (cos_sin, summed), 8x16-head self-attention
without bias or output projection, global max pooling, Dropout(0.5), Dense(1, sigmoid) - with
Adam(1e-3), binary cross-entropy, batch 64.

Fair timing: every framework gets the same CPU thread count (``--threads``, printed; torch
``set_num_threads``, TensorFlow intra- and inter-op pools, ``OMP_NUM_THREADS``). A warm-up (5
batches, not timed) absorbs tracing and allocation. Then one epoch runs with a timestamp after
every batch; the epoch is cut into rounds of ``--round-batches`` batches and the table shows the
median round's samples/s (robust to other processes on a shared CPU). attnkit uses the
trainer's optimizer (``build_optimizer``: fused AdamW with weight decay 0 = Adam).

attnkit's masked rows skip padding (reviews are encoded in length groups, each cut to its
longest review), which the 2018 model cannot do; the "no mask" row does the same work as Keras.

Usage::

    .venv/bin/python benchmarks/imdb_vs_keras.py [--samples 25000] [--threads 1]
        [--lengths imdb|uniform|PATH.jsonl.gz] [--round-batches 20] [--keras-python PY]

Keras rows need ``keras`` and ``tensorflow`` (the ``bench`` extra) in ``--keras-python``
(default: ``.venv-bench/bin/python`` if present, else this interpreter); missing ones print
"not installed".
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
    from attnkit.data.imdb import read_jsonl

    tokenizer = WordTokenizer()
    return np.array([min(len(tokenizer.tokenize(r.text)), MAXLEN) for r in read_jsonl(path)],
                    dtype=np.int64)


def draw_lengths(n: int, review_lengths: np.ndarray | None = None) -> np.ndarray:
    """``n`` lengths (seeded): drawn from ``review_lengths``, or uniform in 10..MAXLEN."""
    rng = np.random.default_rng(1)
    if review_lengths is None:
        return rng.integers(10, MAXLEN + 1, size=n)
    return rng.choice(review_lengths, size=n)


def make_inputs(n: int, review_lengths: np.ndarray | None = None):
    """``n`` reviews: ids ``[n, MAXLEN]`` padded at the start, lengths ``[n]`` (see
    :func:`draw_lengths`), labels ``[n]``."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1, VOCAB, size=(n, MAXLEN), dtype=np.int64)
    lengths = draw_lengths(n, review_lengths)
    for i, n_real in enumerate(lengths):
        ids[i, : MAXLEN - n_real] = 0  # Keras default: padding at the start
    labels = rng.integers(0, 2, size=n).astype(np.float32)
    return ids, lengths.astype(np.int64), labels


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def summarize(ends: list[float], start: float, n: int, round_batches: int) -> dict:
    """Per-batch end times -> epoch seconds and the median round's samples/s."""
    stamps = [start] + ends
    rates = []
    for a in range(0, len(ends), round_batches):
        b = min(a + round_batches, len(ends))
        if b - a == round_batches or not rates:  # a short last round only if it is the only one
            samples = min(b * BATCH, n) - a * BATCH
            rates.append(samples / (stamps[b] - stamps[a]))
    seconds = ends[-1] - start
    return {"seconds": seconds, "epoch_samples_per_s": n / seconds,
            "samples_per_s": float(np.median(rates)), "rounds": len(rates),
            "peak_rss_mb": peak_rss_mb()}


def run_attnkit(n: int, mask: bool, threads: int, round_batches: int,
                review_lengths: np.ndarray | None) -> dict:
    import torch

    sys.path.insert(0, str(REPO / "src"))
    from attnkit.models.sentiment import SentimentClassifier, SentimentConfig
    from attnkit.training import TrainConfig
    from attnkit.training.trainer import build_optimizer

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    ids, lengths, labels = (torch.from_numpy(a) for a in make_inputs(n, review_lengths))
    model = SentimentClassifier(SentimentConfig.keras2018(mask_padding=mask))
    # The trainer's own optimizer (AdamW, weight decay 0 = Adam), as `attnkit sentiment train`.
    opt = build_optimizer(model, TrainConfig(lr=1e-3, weight_decay=0.0))
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def step(s: int) -> None:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(ids[s:s + BATCH], lengths[s:s + BATCH]), labels[s:s + BATCH])
        loss.backward()
        opt.step()

    for s in range(0, 5 * BATCH, BATCH):
        step(s)
    ends = []
    start = time.perf_counter()
    for s in range(0, n, BATCH):
        step(s)
        ends.append(time.perf_counter())
    return {**summarize(ends, start, n, round_batches), "threads": torch.get_num_threads()}


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


def run_keras(n: int, threads: int, round_batches: int,
              review_lengths: np.ndarray | None) -> dict:
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
    return {**summarize(ends, start, n, round_batches), "params": params,
            "version": keras.__version__, "threads": threads}


def worker(name: str, n: int, threads: int, round_batches: int, lengths_file: str) -> dict:
    # The parent read the lengths: the IMDB texts would otherwise count in this peak RSS.
    review_lengths = np.load(lengths_file) if lengths_file else None
    if name.startswith("attnkit"):
        return run_attnkit(n, mask="nomask" not in name, threads=threads,
                           round_batches=round_batches, review_lengths=review_lengths)
    return run_keras(n, threads, round_batches, review_lengths)


def launch(name: str, args: argparse.Namespace, python: str, backend: str | None,
           lengths_file: str) -> dict:
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(args.threads)
    if backend:
        env["KERAS_BACKEND"] = backend
    proc = subprocess.run([python, __file__, "--worker", name, "--samples", str(args.samples),
                           "--threads", str(args.threads),
                           "--round-batches", str(args.round_batches),
                           "--lengths-file", lengths_file],
                          capture_output=True, text=True, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        if "No module named" in tail:
            return {"error": "not installed"}
        return {"error": f"failed: {tail[:120]}"}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=25000)
    bench_py = REPO / ".venv-bench" / "bin" / "python"
    parser.add_argument("--keras-python",
                        default=str(bench_py) if bench_py.exists() else sys.executable)
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads for every framework (default 1)")
    parser.add_argument("--round-batches", type=int, default=20,
                        help="batches per timed round; the median round is reported")
    parser.add_argument("--lengths", default="imdb",
                        help="review lengths: 'imdb' (the shared IMDB train split; uniform if "
                             "it is absent), 'uniform' (10..100) or an IMDB .jsonl(.gz) path")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--lengths-file", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads < 1 or args.round_batches < 1 or args.samples < BATCH:
        parser.error(f"need --threads >= 1, --round-batches >= 1, --samples >= {BATCH}")
    if args.worker:
        print(json.dumps(worker(args.worker, args.samples, args.threads, args.round_batches,
                                args.lengths_file)))
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
    with tempfile.TemporaryDirectory() as tmp:
        lengths_file = ""
        if review_lengths is not None:
            lengths_file = str(Path(tmp) / "lengths.npy")
            np.save(lengths_file, review_lengths)
        rows = [
            ("attnkit (masked)", launch("attnkit", args, sys.executable, None, lengths_file)),
            ("attnkit (no mask, as 2018)",
             launch("attnkit-nomask", args, sys.executable, None, lengths_file)),
            ("Keras 3 / tensorflow",
             launch("keras", args, args.keras_python, "tensorflow", lengths_file)),
            ("Keras 3 / torch", launch("keras", args, args.keras_python, "torch", lengths_file)),
        ]
    base = rows[0][1].get("samples_per_s")
    mean_length = float(np.mean(draw_lengths(args.samples, review_lengths)))
    sys.path.insert(0, str(REPO / "src"))
    from attnkit.machine import machine_line

    print(f"machine: {machine_line()} (each framework at --threads)")
    print(f"review lengths {described} (capped at {MAXLEN}; mean {mean_length:.1f} real ids)")
    print(f"one epoch, {args.samples} samples, batch {BATCH}, maxlen {MAXLEN}, "
          f"{args.threads} thread(s) per framework, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; samples/s = median of rounds of "
          f"{args.round_batches} batches (warm-up excluded)")
    print(f"{'framework':<28} {'samples/s':>10} {'epoch s/s':>10} {'attnkit x':>10} "
          f"{'peak RSS MB':>12}")
    for name, r in rows:
        if "error" in r:
            print(f"{name:<28} {r['error']}")
            continue
        ratio = base / r["samples_per_s"] if base else float("nan")
        print(f"{name:<28} {r['samples_per_s']:>10.0f} {r['epoch_samples_per_s']:>10.0f} "
              f"{ratio:>10.2f} {r['peak_rss_mb']:>12.0f}")


if __name__ == "__main__":
    main()
