"""``attnkit translate`` end to end on a tiny run: train, eval --json, predict, every user
mistake as one error line, the run-folder rules, and a SIGTERM stop that resumes."""

import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from attnkit.apps.translate import APP
from attnkit.cli.main import main
from attnkit.training.run_folder import RunLock

TINY = ["--hidden", "32", "--emb-dim", "16", "--batch-size", "8", "--lr", "1e-2",
        "--no-progress", "--examples", "1"]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models: one thread is the fastest (conftest's ``one_thread``)."""


@pytest.fixture(scope="module")
def run_dir(number_pairs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    number_pairs(folder / "pairs.tsv", n=200, seed=0, words=5, max_words=4)
    before = torch.get_num_threads()
    rc = main(["translate", "train", "--data", str(folder / "pairs.tsv"), "--out",
               str(folder / "run"), "--epochs", "3", "--max-minutes", "0", *TINY])
    torch.set_num_threads(before)
    assert rc == 0
    return folder / "run"


def snapshot(folder):
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def assert_one_error_line(capsys, *needles):
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnkit: error:"), captured.err
    assert "Traceback" not in captured.out + captured.err
    for needle in needles:
        assert needle in err[0], (needle, err[0])
    return err[0]


def cli(*argv):
    """``attnkit translate ARGV``'s exit code (argparse's own errors exit through SystemExit)."""
    try:
        return main(["translate", *argv])
    except SystemExit as exc:
        return exc.code


def test_train_wrote_a_run(run_dir):
    assert (run_dir / "best.safetensors").exists()
    assert (run_dir / "heatmap.png").exists()
    assert json.loads((run_dir / "config.json").read_text())["train"]["max_minutes"] is None


def test_eval_json_is_the_last_line(run_dir, capsys, tmp_path):
    report = tmp_path / "r.html"
    assert main(["translate", "eval", "--run", str(run_dir), "--beam", "2", "--json",
                 "--report", str(report)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    metrics = json.loads(out[-1])
    assert {"bleu", "chrf", "counts", "sentences_per_s"} <= set(metrics)
    assert metrics["beam"] == 2 and metrics["engine"] == "attnkit" and metrics["truncated"] == 0
    assert len(out) == 1            # --json: the metrics alone, for programs
    page = report.read_text()
    assert 'id="attnkit-data"' in page and "whole test set" in page   # the explorer page


def test_predict_argument_plot_html_and_stdin(run_dir, tmp_path, capsys, monkeypatch):
    plot, page = tmp_path / "one.png", tmp_path / "one.html"
    assert main(["translate", "predict", "--run", str(run_dir), "one two .", "six .",
                 "--plot", str(plot), "--html", str(page)]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 2
    # Several inputs: FILE-1, FILE-2 (one convention in every app).
    first, second = tmp_path / "one-1.png", tmp_path / "one-2.png"
    assert first.stat().st_size > 1000 and second.exists() and not plot.exists()
    assert 'id="attnkit-data"' in page.read_text()
    # "six" is not a word of the run: over 10% unknown is a warning, not a note.
    assert "attnkit: warning: sentence 2: 1 of the 1 words it read is unknown to the run " \
        "(six)" in captured.err
    monkeypatch.setattr("sys.stdin", io.StringIO("three four .\n\none .\n"))
    assert main(["translate", "predict", "--run", str(run_dir), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [r["source"] for r in rows] == ["three four .", "one ."]
    assert all(len(r["weights"]) == len(r["tokens"]) for r in rows)


def test_outputs_never_land_on_the_runs_files(run_dir, capsys):
    """#47: ``predict --html RUN/report.html`` / ``--plot RUN/heatmap.png`` replaced the run's
    own report and heatmap (exit 0), and predictions could go into ``RUN/last/``."""
    before = snapshot(run_dir)
    for flag, name in (("--html", "report.html"), ("--plot", "heatmap.png"),
                       ("--html", "last/p.html"), ("--plot", "mine.png")):
        assert cli("predict", "--run", str(run_dir), "one two .", flag,
                   str(run_dir / name)) == 2
        assert_one_error_line(capsys, "inside the run folder")
    assert cli("eval", "--run", str(run_dir), "--report", str(run_dir / "report.html")) == 2
    assert_one_error_line(capsys, "inside the run folder")
    assert snapshot(run_dir) == before


def test_an_eval_run_otherwise_writes_beside_the_runs_figures(run_dir, capsys):
    own = json.loads((run_dir / "test_metrics.json").read_text())
    assert cli("eval", "--run", str(run_dir), "--beam", "3", "--json") == 0
    assert json.loads((run_dir / "test_metrics.json").read_text()) == own
    beside = json.loads((run_dir / "test_metrics.beam-3.alpha-0.6.json").read_text())
    assert beside["beam"] == 3 and beside["stop_reason"] == own["stop_reason"]
    assert cli("eval", "--run", str(run_dir), "--json") == 0     # as the training's: in place
    assert json.loads((run_dir / "test_metrics.json").read_text())["bleu"] == own["bleu"]
    capsys.readouterr()


def test_the_reports_examples_are_translated_as_predict_translates(run_dir, tmp_path,
                                                                   monkeypatch):
    """#45: a two-sentence test line was decoded whole for the report and its heatmap (the
    output looped), while predict splits it and translates each sentence."""
    from attnkit.apps.translate import evaluation, load_run

    line = "one two three . four five ."
    monkeypatch.setattr(evaluation, "load_splits",
                        lambda *a, **k: {"test": [(line, "un deux trois . quatre cinq .")]})
    import shutil

    run = shutil.copytree(run_dir, tmp_path / "run")
    logged = []
    loaded = load_run(run)
    evaluation.after_training(loaded, json.loads((run / "test_metrics.json").read_text()),
                              logged.append)
    shown = next(entry for entry in logged if entry.startswith("  EN  "))
    want = APP.predict(loaded, [line])[0].text
    assert f"  OUT {want}\n" in shown


def test_a_paragraph_comes_back_whole(run_dir, capsys):
    """Three sentences in, three translated sentences out (each as it is translated alone),
    with the paragraph break kept; --no-split reads the text as one sentence."""
    alone = ["one two .", "three four .", "five one ."]
    assert main(["translate", "predict", "--run", str(run_dir), *alone]) == 0
    each = capsys.readouterr().out.strip().splitlines()
    text = "one two . three four .\n\nfive one ."
    assert main(["translate", "predict", "--run", str(run_dir), text]) == 0
    assert capsys.readouterr().out == f"{each[0]} {each[1]}\n\n{each[2]}\n"
    assert main(["translate", "predict", "--run", str(run_dir), text, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert [s["source"] for s in row["sentences"]] == alone
    assert [s["text"] for s in row["sentences"]] == each and row["weights"] is None
    assert all(len(s["weights"]) == len(s["tokens"]) for s in row["sentences"])
    assert main(["translate", "predict", "--run", str(run_dir), text, "--no-split",
                 "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert "sentences" not in row and len(row["weights"]) == len(row["tokens"])


def test_unknown_words_warn_above_a_tenth(run_dir, capsys):
    # Whole words, punctuation aside: 1 unknown of 10 (10%): a note; 2 of 4: a warning,
    # each naming the words.
    assert main(["translate", "predict", "--run", str(run_dir),
                 "one two three four five one two three four zebra .",
                 "one two zebra apple ."]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "attnkit: note: sentence 1: 1 of the 10 words it read is unknown to the run " \
        "(zebra)" in err
    assert [line.split(":")[:3] for line in err if "warning" in line] == [
        ["attnkit", " warning", " sentence 2"]]
    assert "2 of the 4 words it read are unknown to the run (zebra, apple)" in err[-1]


def test_a_huge_input_is_capped(run_dir, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(" ".join(["one"] * 100_000) + "\n"))
    start = time.perf_counter()
    assert main(["translate", "predict", "--run", str(run_dir)]) == 0
    assert time.perf_counter() - start < 60
    assert "99488 tokens cut off after the first 512" in capsys.readouterr().err


def _broken_runs(run_dir, tmp_path):
    """Run folders that must each fail with one line: name -> folder."""
    runs = {}
    for name, config in (("bad_json", b"{nope"), ("not_utf8", b"\xff\xfe\x00{"),
                         ("sentiment", b'{"app": "sentiment", "format": 2}')):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_bytes(config)
        runs[name] = folder
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    for name in ("config.json", "vocab_src.json", "vocab_tgt.json"):
        (truncated / name).write_bytes((run_dir / name).read_bytes())
    (truncated / "best.safetensors").write_bytes((run_dir / "best.safetensors").read_bytes()[:100])
    runs["truncated"] = truncated
    return runs


def test_user_mistakes_are_one_line_without_traceback(run_dir, tmp_path, capsys, monkeypatch):
    data = str(run_dir.parent / "pairs.tsv")
    cases = [
        (["predict", "--run", str(run_dir), " "], "is empty"),
        (["predict", "--run", str(run_dir), "one .", "--beam", "0"], "--beam must be"),
        (["eval", "--run", str(tmp_path / "nowhere")], "no such run folder"),
        (["eval", "--run", str(run_dir), "--data", str(tmp_path / "absent.tsv")],
         "no such file"),
        (["train", "--data", str(tmp_path / "absent.tsv"), "--out", str(tmp_path / "n1")],
         "no such file"),
        (["train", "--data", data, "--out", str(tmp_path / "n2"), "--hidden", "-3"],
         "--hidden must be"),
        (["train", "--data", data, "--out", str(tmp_path / "n3"), "--max-minutes", "-1"],
         "--max-minutes must be"),
        (["train", "--data", data], "--out"),
        (["train", "--resume", str(tmp_path / "nothing")], "nothing to resume"),
        (["train", "--resume", str(run_dir), "--seed", "3"], "--seed 3 differs"),
        (["train", "--resume", str(run_dir), "--overwrite"], "contradict"),
        (["train", "--data", data, "--out", str(run_dir)], "--overwrite"),
        (["train", "--data", data, "--out", str(tmp_path / "n4"), "--amp", "maybe"],
         "invalid choice"),
    ]
    cases += [(["predict", "--run", str(folder), "one ."], "")
              for folder in _broken_runs(run_dir, tmp_path).values()]
    before = snapshot(run_dir)
    for argv, needle in cases:
        assert cli(*argv) == 2, argv
        assert_one_error_line(capsys, needle)
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert main(["translate", "predict", "--run", str(run_dir)]) == 2
    assert_one_error_line(capsys, "no sentence")
    assert snapshot(run_dir) == before
    assert not any((tmp_path / f"n{i}").exists() for i in range(1, 5))


def test_a_run_of_another_app_names_the_app(run_dir, tmp_path, capsys):
    folder = _broken_runs(run_dir, tmp_path)["sentiment"]
    assert main(["translate", "eval", "--run", str(folder)]) == 2
    assert_one_error_line(capsys, "is a sentiment run, not a translate run")


def test_overwrite_and_the_lock(run_dir, tmp_path, capsys):
    run = tmp_path / "run"
    (run / "last").mkdir(parents=True)
    (run / "config.json").write_text((run_dir / "config.json").read_text())
    with RunLock(run):
        assert main(["translate", "train", "--data", str(run_dir.parent / "pairs.tsv"),
                     "--out", str(run), "--overwrite", "--epochs", "1", *TINY]) == 2
        assert_one_error_line(capsys, f"PID {os.getpid()}")
    assert main(["translate", "train", "--data", str(run_dir.parent / "pairs.tsv"), "--out",
                 str(run), "--overwrite", "--epochs", "1", "--max-minutes", "0", *TINY]) == 0
    assert (run / "best.safetensors").exists() and (run / "test_metrics.json").exists()


@pytest.mark.parametrize("action", [[], ["train"], ["eval"], ["predict"], ["export"]])
def test_help_everywhere_has_examples(action, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["translate", *action, "--help"])
    assert exit_info.value.code == 0
    assert "attnkit translate train --data synthetic" in capsys.readouterr().out


# ---------------------------------------------------------------------------- CTranslate2

@pytest.fixture(scope="module")
def transformer_run(number_pairs, tmp_path_factory):
    """A tiny Transformer with subwords, trained through the CLI (seconds)."""
    pytest.importorskip("sentencepiece")
    folder = tmp_path_factory.mktemp("cli-transformer")
    number_pairs(folder / "pairs.tsv", n=300, seed=0, words=5, max_words=4)
    before = torch.get_num_threads()
    rc = main(["translate", "train", "--data", str(folder / "pairs.tsv"), "--out",
               str(folder / "run"), "--arch", "transformer", "--d-model", "32", "--heads", "2",
               "--ff-dim", "64", "--dropout", "0", "--subword", "30", "--epochs", "10",
               "--batch-size", "16", "--lr", "5e-3", "--warmup", "10", "--max-minutes", "0",
               "--no-progress", "--examples", "1"])
    torch.set_num_threads(before)
    assert rc == 0
    return folder / "run"


def test_export_then_ctranslate2_gives_attnkit_greedy(transformer_run, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    out = tmp_path / "ct2"
    assert cli("export", str(transformer_run), str(out), "--quantization", "float32") == 0
    assert "exported:" in capsys.readouterr().out and (out / "model.bin").is_file()
    sentences = ["one two three .", "five four .", "two two one ."]
    assert cli("predict", "--run", str(transformer_run), "--no-unk-replace", *sentences) == 0
    want = capsys.readouterr().out.splitlines()
    assert cli("predict", "--run", str(out), "--engine", "ctranslate2", *sentences) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == want and len(want) == 3
    assert "note: the CTranslate2 engine computes no attention" in captured.err
    rows = {}
    for engine, run in (("attnkit", transformer_run), ("ctranslate2", out)):
        assert cli("eval", "--run", str(run), "--engine", engine, "--no-unk-replace",
                   "--json") == 0
        rows[engine] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert rows[engine]["engine"] == engine and rows[engine]["sentences_per_s"] > 0
    assert rows["ctranslate2"]["bleu"] == rows["attnkit"]["bleu"]
    assert rows["ctranslate2"]["quantization"] == "float32"
    page = tmp_path / "p.html"
    assert cli("predict", "--run", str(transformer_run), "one two .", "--html", str(page)) == 0
    assert 'id="layer"' in page.read_text() and '"L":2,"H":2' in page.read_text()
    capsys.readouterr()
    cases = [(["predict", "--run", str(out), "--engine", "ctranslate2", "one .", "--html",
               str(tmp_path / "x.html")], "computes no attention"),
             (["predict", "--run", str(out), "--engine", "ctranslate2", "one .", "--plot",
               str(tmp_path / "x.png")], "computes no attention"),
             (["eval", "--run", str(out), "--engine", "ctranslate2", "--report",
               str(tmp_path / "x.html")], "computes no attention"),
             (["predict", "--run", str(transformer_run), "--engine", "ctranslate2", "one ."],
              "export it first"),
             (["predict", "--run", str(out), "one ."], "--engine ctranslate2"),
             (["export", str(transformer_run), str(out)], "not empty")]
    for argv, needle in cases:
        assert cli(*argv) == 2, argv
        assert_one_error_line(capsys, needle)
    assert not (tmp_path / "x.html").exists() and not (tmp_path / "x.png").exists()


def test_export_and_engine_refusals(run_dir, transformer_run, tmp_path, capsys, monkeypatch):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    cases = [(["export", str(run_dir), str(tmp_path / "a")], "Transformer runs only"),
             (["export", str(transformer_run), str(full)], "not empty"),
             (["export", str(transformer_run), str(tmp_path / "b"), "--quantization", "int3"],
              "quantization must be one of")]
    if importlib.util.find_spec("ctranslate2") is not None:
        # An RNN run cannot be exported: the hint is not "export it first" (a dead end).
        assert cli("predict", "--run", str(run_dir), "--engine", "ctranslate2", "one .") == 2
        assert_one_error_line(capsys, "use it without --engine ctranslate2")
    monkeypatch.setitem(sys.modules, "ctranslate2", None)      # not installed
    cases += [(["export", str(transformer_run), str(tmp_path / "c")], "serve extra"),
              (["predict", "--run", str(tmp_path), "--engine", "ctranslate2", "one ."],
               "install the serve extra: pip install 'attnkit[serve]'"),
              (["eval", "--run", str(tmp_path), "--engine", "ctranslate2"], "serve extra")]
    for argv, needle in cases:
        assert cli(*argv) == 2, argv
        assert_one_error_line(capsys, needle)
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
    assert not any((tmp_path / name).exists() for name in "abc")


# ---------------------------------------------------------------------------- SIGTERM

def _start(args, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "attnkit.cli.main", "translate", "train",
                             *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_until(predicate, proc, timeout=240.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"training ended before the signal: {out[-2000:]} {err[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("training did not start in time")
        time.sleep(0.2)


def _has_eval(run):
    path = run / "metrics.jsonl"
    return path.exists() and '"eval"' in path.read_text()


@pytest.mark.slow
def test_sigterm_stops_cleanly_and_resume_finishes(number_pairs, tmp_path):
    data = number_pairs(tmp_path / "pairs.tsv", n=200, seed=0, words=5, max_words=4)
    run = tmp_path / "run"
    proc = _start(["--data", str(data), "--out", str(run), "--epochs", "400",
                   "--eval-every", "5", "--valid-sample", "2", "--max-minutes", "0", *TINY],
                  tmp_path)
    _wait_until(lambda: _has_eval(run), proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in out + err and "error" not in err
    assert (run / "last").is_dir() and not (run / "test_metrics.json").exists()
    proc = _start(["--resume", str(run), "--epochs", "1"], tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert (run / "test_metrics.json").exists()
    assert json.loads((run / "config.json").read_text())["train"]["epochs"] == 1


@pytest.mark.slow
def test_sigterm_before_the_first_evaluation(number_pairs, tmp_path):
    data = number_pairs(tmp_path / "pairs.tsv", n=3000, seed=0, words=5, max_words=4)
    run = tmp_path / "run"
    proc = _start(["--data", str(data), "--out", str(run), "--epochs", "5", "--batch-size",
                   "1", "--hidden", "16", "--emb-dim", "8", "--no-progress"], tmp_path)
    _wait_until(lambda: (run / "metrics.jsonl").exists(), proc)
    time.sleep(1.0)   # the trainer starts metrics.jsonl, then installs its signal handler
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in out + err and "checkpoint file is missing" not in err
    assert (run / "last").is_dir() and not (run / "best.safetensors").exists()
