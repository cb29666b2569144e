"""Training speed of a run's model on its data: the eager step against the compiled one, in
interleaved rounds.

Run: ``.venv/bin/python benchmarks/train_speed.py RUN [--threads 2] [--rounds 5] [--steps 24]
[--skip 3] [--cache DIR]``; ``--quick`` (2 rounds of 6 steps) checks that it runs. On the
recipe's run at 2 threads the defaults take a few minutes, the first compile included.

``RUN`` is a translate or sentiment run folder; it is only read. Its settings, data and model
(initialised from its seed: the run's weights are not read) train with the app's own trainer
(`make_trainer` of its training module, without validation) in this process, with the memory
settings the ``attnkit`` command starts with. Two modes: ``eager`` (``--compile off``) and
``compiled`` (``--compile on``). Round ``r`` gives each mode the same ``--steps`` batches of the
run's first-epoch plan (batches ``r * steps`` on), one ``Trainer.fit`` each, back to back, the
order alternating between rounds; a mode's samples/s in a round is its samples over its steps'
seconds (``metrics.jsonl``), its first ``--skip`` steps left out (a fit's first compiled step
compiles). ``compiled_vs_eager`` is the median over the rounds of compiled / eager samples/s,
``spread`` the largest of those ratios over the smallest. ``compile_s``: the first compiled
step's seconds less the median eager step's, in the first round (``cold``: Inductor's cache
held nothing of this model: a fresh ``--cache`` folder, the default) and the second (from the
cache). ``others_cpu``: the share of the CPUs other processes used while the mode ran (its
timing is suspect above a few percent).

The last line is JSON: ``{"rows": [{"mode", "round", "samples_per_s", "steps", "others_cpu"}],
"compiled_vs_eager": ..., "spread": ..., "compile_s": {"cold", "warm"}, "machine": {...}}``;
the line before it is the machine line.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from attnkit.allocator import reuse_freed_memory  # noqa: E402
from attnkit.apps import APPS  # noqa: E402
from attnkit.apps.run_files import CONFIG_FILE  # noqa: E402
from attnkit.fileio import read_json  # noqa: E402
from attnkit.machine import machine_info, machine_line  # noqa: E402
from attnkit.training import seed_everything  # noqa: E402
from attnkit.training.run_folder import METRICS_LOG  # noqa: E402
from imdb_vs_keras import OthersMeter  # noqa: E402

MODES = {"eager": "off", "compiled": "on"}


def quiet(_: str) -> None:
    """A log that drops the app's lines (loading, resuming)."""


def prepared(run: Path) -> tuple[Any, Any]:
    """The run's training module and its prepared data, read back from the run (as a resume
    reads them)."""
    config = read_json(run / CONFIG_FILE)
    name = config.get("app")
    if name not in ("translate", "sentiment"):
        raise SystemExit(f"{run}: a {name!r} run; this benchmark times translate and "
                         "sentiment runs")
    app = APPS[name]
    prep = app.reload(app.configure({}, run, config), run, quiet)
    return importlib.import_module(f"attnkit.apps.{name}.training"), prep


def step_seconds(folder: Path) -> list[float]:
    """Each step's seconds from a fit's ``metrics.jsonl`` (one train line a step)."""
    lines = [json.loads(s) for s in (folder / METRICS_LOG).read_text().splitlines()]
    ends = [0.0] + [r["elapsed"] for r in lines if r["kind"] == "train"]
    return [b - a for a, b in zip(ends, ends[1:], strict=False)]


def one_fit(training: Any, prep: Any, mode: str, batches: list[list[int]],
            folder: Path) -> list[float]:
    """Train the run's model on ``batches`` in ``mode``; each step's seconds."""
    seed_everything(prep.train.seed)
    trainer = training.make_trainer(prep, folder, log=quiet, evaluate=False)
    trainer.cfg = dataclasses.replace(
        trainer.cfg, epochs=1, compile=MODES[mode], max_minutes=None, log_every_steps=1,
        eval_every_steps=None, checkpoint_every_steps=None, early_stopping_patience=None,
        progress=False)
    trainer.batch_plan = lambda epoch, seed: batches
    trainer.fit()
    return step_seconds(folder)


def _rounded(share: float | None) -> float | None:
    return None if share is None else round(share, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=24, help="batches a mode trains a round")
    parser.add_argument("--skip", type=int, default=3,
                        help="first steps of each fit left out of its samples/s")
    parser.add_argument("--cache", type=Path, default=None,
                        help="ATTNKIT_CACHE for Inductor's files (default: a fresh temporary "
                             "folder, so the first compile is cold)")
    parser.add_argument("--quick", action="store_true",
                        help="2 rounds of 6 steps, 2 skipped: a check that it runs, not figures")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps, args.skip = 2, 6, 2
    if args.steps <= args.skip or args.rounds < 1 or args.threads < 1:
        parser.error("need --steps > --skip, --rounds >= 1, --threads >= 1")
    reuse_freed_memory()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ATTNKIT_CACHE"] = str(args.cache or Path(tmp) / "cache")
        training, prep = prepared(args.run)
        trainer = training.make_trainer(prep, Path(tmp) / "plan", log=quiet, evaluate=False)
        plan = trainer.batch_plan(0, prep.train.seed)
        sizes = [len(b) for b in plan]
        if len(plan) < args.rounds * args.steps:
            parser.error(f"the run's epoch has {len(plan)} batches, fewer than --rounds x "
                         "--steps")
        rows, firsts, eager_steps = [], [], []
        for r in range(args.rounds):
            start = r * args.steps
            batches = plan[start:start + args.steps]
            samples = sizes[start + args.skip:start + args.steps]
            order = list(MODES) if r % 2 == 0 else list(MODES)[::-1]
            for mode in order:
                if mode == "compiled" and r == 1:
                    torch._dynamo.reset()   # compiled again, as a new process would: from the cache
                meter = OthersMeter()
                seconds = one_fit(training, prep, mode, batches, Path(tmp) / mode)
                rows.append({"mode": mode, "round": r + 1,
                             "samples_per_s": round(sum(samples) / sum(seconds[args.skip:]), 1),
                             "steps": len(seconds), "others_cpu": _rounded(meter.share())})
                if mode == "compiled":
                    firsts.append(seconds[0])
                else:
                    eager_steps.append(statistics.median(seconds[args.skip:]))
                print(f"round {r + 1} {mode}: {rows[-1]['samples_per_s']} samples/s "
                      f"(others {rows[-1]['others_cpu']})", flush=True)
        ratios = []
        for r in range(1, args.rounds + 1):
            rate = {row["mode"]: row["samples_per_s"] for row in rows if row["round"] == r}
            ratios.append(rate["compiled"] / rate["eager"])
        compile_s = {key: round(first - eager, 1) for key, first, eager
                     in zip(("cold", "warm"), firsts, eager_steps, strict=False)}
    info = {**machine_info(), "threads": torch.get_num_threads()}
    print(f"machine: {machine_line(info)}; load average {os.getloadavg()[0]:.2f} at the end")
    print(json.dumps({"rows": rows, "compiled_vs_eager": round(statistics.median(ratios), 3),
                      "spread": round(max(ratios) / min(ratios), 3),
                      "ratios": [round(x, 3) for x in ratios], "compile_s": compile_s,
                      "run": str(args.run), "machine": info}))


if __name__ == "__main__":
    main()
