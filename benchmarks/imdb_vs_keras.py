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

Rows: attnkit in float32, with the memory settings the ``attnkit`` command starts with
(`attnkit.allocator.reuse_freed_memory`: glibc keeps freed blocks for the next step), and again
with glibc's defaults; attnkit with ``--amp auto`` (bf16 autocast where this CPU has native
bf16, as ``attnkit sentiment train`` decides; elsewhere that is float32 and the row says so
instead of running again); attnkit without masking (the 2018 model's own work, padding
included); Keras 3 on TensorFlow; Keras 3 on torch.

Fair timing: every framework gets the same CPU thread count (each of ``--threads``, e.g. ``1,2``
for one run at 1 and at 2 threads; torch ``set_num_threads``, TensorFlow intra- and inter-op
pools, ``OMP_NUM_THREADS``). A warm-up (5 batches, not timed) absorbs tracing and allocation.

* Training: one epoch with a timestamp after every batch, cut into rounds of
  ``--round-batches`` batches; samples/s is the median round's (robust to other processes on a
  shared CPU). attnkit uses the trainer's optimizer (``build_optimizer``: fused AdamW with weight
  decay 0 = Adam).
* Inference: ``--infer-reps`` passes over the first ``--infer-samples`` reviews, batch 64, in
  eval mode; samples/s is the median pass's. Keras: ``model.predict``; attnkit:
  ``SentimentClassifier.logits_by_length`` (the reviews in length order, no attention weights).

attnkit's masked rows skip padding (reviews are encoded in length groups, each cut to its
longest review), which the 2018 model cannot do; the "no mask" row does the same work as Keras.
The last line is JSON: the machine, and per thread count ``train_vs_keras_tf`` and
``infer_vs_keras_tf`` (attnkit float32 / Keras on TensorFlow, samples/s), ``peak_rss_mb`` per
row and every row's samples/s.

Usage::

    .venv/bin/python benchmarks/imdb_vs_keras.py [--samples 25000] [--threads 1,2]
        [--lengths imdb|uniform|PATH.jsonl.gz] [--round-batches 20] [--infer-samples 6400]
        [--infer-reps 3] [--keras-python PY]

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
            "samples_per_s": float(np.median(rates)), "rounds": len(rates)}


def median_rate(n: int, seconds: list[float]) -> float:
    """Samples/s of the median of several timed passes over ``n`` samples."""
    return n / float(np.median(seconds))


def run_attnkit(n: int, mode: str, threads: int, round_batches: int,
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
    result = summarize(ends, start, n, round_batches)
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


def run_keras(n: int, threads: int, round_batches: int, review_lengths: np.ndarray | None,
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
    result = summarize(ends, start, n, round_batches)
    model.predict(ids[: 5 * BATCH], batch_size=BATCH, verbose=0)
    passes = []
    for _ in range(infer_reps):
        start = time.perf_counter()
        model.predict(ids[:infer_n], batch_size=BATCH, verbose=0)
        passes.append(time.perf_counter() - start)
    return {**result, "infer_samples_per_s": median_rate(min(infer_n, n), passes),
            "peak_rss_mb": peak_rss_mb(), "params": params, "version": keras.__version__,
            "threads": threads}


def worker(name: str, n: int, threads: int, round_batches: int, lengths_file: str,
           infer_n: int, infer_reps: int) -> dict:
    # The parent read the lengths: the IMDB texts would otherwise count in this peak RSS.
    review_lengths = np.load(lengths_file) if lengths_file else None
    meter = OthersMeter()
    if name.startswith("attnkit-"):
        result = run_attnkit(n, name.removeprefix("attnkit-"), threads, round_batches,
                             review_lengths, infer_n, infer_reps)
    else:
        result = run_keras(n, threads, round_batches, review_lengths, infer_n, infer_reps)
    return {**result, "others_cpu": meter.share()}


# (label in the table and the JSON, worker name, which Python, KERAS_BACKEND)
ROWS = (("attnkit float32", "attnkit-float32", "self", None),
        ("attnkit float32, glibc malloc defaults", "attnkit-float32-malloc-defaults", "self",
         None),
        ("attnkit --amp auto", "attnkit-amp", "self", None),
        ("attnkit no mask (as 2018)", "attnkit-nomask", "self", None),
        ("Keras 3 / tensorflow", "keras", "keras", "tensorflow"),
        ("Keras 3 / torch", "keras", "keras", "torch"))
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


def _ratio(rows: dict[str, dict], key: str) -> float:
    return round(rows[BASE][key] / rows[KERAS_TF][key], 3)


def summary(results: dict[int, dict[str, dict]]) -> dict[str, dict]:
    """Per thread count: attnkit float32 / Keras on TensorFlow for training and inference
    samples/s (None where a row failed), and every row's samples/s and peak RSS.

    ``results[threads][row label]`` is a worker's dict (``samples_per_s``,
    ``infer_samples_per_s``, ``peak_rss_mb``; or ``error``; or ``same_as_float32``).
    """
    out = {}
    for threads, rows in results.items():
        rows = {name: (rows[BASE] if r.get("same_as_float32") else r)
                for name, r in rows.items()}
        ok = {name: r for name, r in rows.items() if "error" not in r}

        both = BASE in ok and KERAS_TF in ok
        out[str(threads)] = {
            "train_vs_keras_tf": _ratio(ok, "samples_per_s") if both else None,
            "infer_vs_keras_tf": _ratio(ok, "infer_samples_per_s") if both else None,
            "peak_rss_mb": {name: round(r["peak_rss_mb"]) for name, r in ok.items()},
            "train_samples_per_s": {name: round(r["samples_per_s"], 1) for name, r in ok.items()},
            "infer_samples_per_s": {name: round(r["infer_samples_per_s"], 1)
                                    for name, r in ok.items()},
            "others_cpu": {name: r.get("others_cpu") for name, r in ok.items()},
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
                           "--round-batches", str(args.round_batches),
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


def _vs(row: dict, keras_tf: dict, key: str) -> str:
    if "error" in keras_tf or key not in keras_tf:
        return f"{'-':>10}"
    return f"{row[key] / keras_tf[key]:>10.2f}"


def print_table(threads: int, rows: dict[str, dict]) -> None:
    base = rows.get(BASE, {})
    keras_tf = rows.get(KERAS_TF, {})
    print(f"{threads} thread(s):")
    print(f"  {'framework':<38} {'train/s':>8} {'x Keras/TF':>10} {'infer/s':>8} "
          f"{'x Keras/TF':>10} {'peak RSS MB':>12} {'others':>6}")
    for name, r in rows.items():
        if "error" in r:
            print(f"  {name:<38} {r['error']}")
            continue
        if r.get("same_as_float32"):
            print(f"  {name:<38} = float32: no native bf16 here, so --amp auto trains in "
                  "float32")
            continue

        print(f"  {name:<38} {r['samples_per_s']:>8.0f} {_vs(r, keras_tf, 'samples_per_s')} "
              f"{r['infer_samples_per_s']:>8.0f} {_vs(r, keras_tf, 'infer_samples_per_s')} "
              f"{r['peak_rss_mb']:>12.0f} {_percent(r.get('others_cpu')):>6}"
              + ("  (bf16 autocast)" if r.get("bf16") else ""))
    if "error" not in base and "error" not in keras_tf and base and keras_tf:
        peak_ok = base["peak_rss_mb"] <= keras_tf["peak_rss_mb"]
        print(f"  attnkit float32 peak RSS {'<=' if peak_ok else '>'} Keras/TF's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=25000)
    bench_py = REPO / ".venv-bench" / "bin" / "python"
    parser.add_argument("--keras-python",
                        default=str(bench_py) if bench_py.exists() else sys.executable)
    parser.add_argument("--threads", default="1,2",
                        help="CPU thread counts, each for every framework (default 1,2)")
    parser.add_argument("--round-batches", type=int, default=20,
                        help="batches per timed training round; the median round is reported")
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
    except ValueError as e:
        parser.error(str(e))
    if args.round_batches < 1 or args.samples < BATCH or args.infer_samples < BATCH \
            or args.infer_reps < 1:
        parser.error(f"need --round-batches >= 1, --samples >= {BATCH}, --infer-samples >= "
                     f"{BATCH}, --infer-reps >= 1")
    if args.worker:
        print(json.dumps(worker(args.worker, args.samples, thread_counts[0], args.round_batches,
                                args.lengths_file, min(args.infer_samples, args.samples),
                                args.infer_reps)))
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
    results: dict[int, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        lengths_file = ""
        if review_lengths is not None:
            lengths_file = str(Path(tmp) / "lengths.npy")
            np.save(lengths_file, review_lengths)
        for threads in thread_counts:
            results[threads] = {
                label: launch(worker_name, args, threads,
                              sys.executable if python == "self" else args.keras_python,
                              backend, lengths_file)
                for label, worker_name, python, backend in ROWS}
    mean_length = float(np.mean(draw_lengths(args.samples, review_lengths)))
    sys.path.insert(0, str(REPO / "src"))
    from attnkit.machine import machine_info, machine_line

    info = machine_info()
    print(f"machine: {machine_line({**info, 'threads': args.threads})} (each framework at "
          f"each thread count; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} "
          "at the end)")
    print(f"review lengths {described} (capped at {MAXLEN}; mean {mean_length:.1f} real ids)")
    print("others = share of the CPUs that other processes used while the row ran (its "
          "timings are suspect above a few %)")
    print(f"training: one epoch, {args.samples} samples, batch {BATCH}, maxlen {MAXLEN}; "
          f"samples/s = median of rounds of {args.round_batches} batches (warm-up excluded). "
          f"inference: {min(args.infer_samples, args.samples)} samples, batch {BATCH}, "
          f"median of {args.infer_reps} passes")
    for threads, rows in results.items():
        print_table(threads, rows)
    print(json.dumps({"machine": info, "threads": summary(results)}))


if __name__ == "__main__":
    main()
