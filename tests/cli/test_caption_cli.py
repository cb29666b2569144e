"""``attnkit caption``: tiny runs end to end through the command line, every user mistake as one
line and exit 2, the run-folder rules (overwrite, resume, lock) and a SIGTERM stop."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from PIL import Image

from attnkit.cli.main import main
from attnkit.data.scenes import make_scenes
from attnkit.training.run_folder import RunLock

# Small convolutions and per-word steps: a second thread only spins on a shared CPU.
pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--num-train", "8", "--num-valid", "2", "--num-test", "2", "--image-size", "32",
        "--epochs", "1", "--batch-size", "8", "--device", "cpu", "--threads", "1",
        "--no-progress"]


def train(run, *extra: str) -> int:
    return main(["caption", "train", "--out", str(run), *TINY, *extra])


def error_line(capsys, argv: list[str]) -> str:
    """Run the CLI expecting a user error: exit 2 and exactly one line on stderr."""
    capsys.readouterr()  # only this command's output counts
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnkit: error:"), err
    return lines[0]


def snapshot(folder):
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def scene_file(folder, name: str = "scene.png", size: int = 32, mode: str = "RGB"):
    path = folder / name
    Image.fromarray(make_scenes(1, 42, size=size)[0].image).convert(mode).save(path)
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import torch

    out = tmp_path_factory.mktemp("caption_cli") / "run"
    before = torch.get_num_threads()
    try:
        assert train(out, "--num-train", "16", "--num-valid", "4", "--num-test", "4") == 0
    finally:
        torch.set_num_threads(before)
    return out


def test_help_has_examples(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["caption", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "attnkit caption predict" in out
    for action, option in (("train", "--num-train"), ("eval", "--report"),
                           ("predict", "--plot")):
        with pytest.raises(SystemExit):
            main(["caption", action, "--help"])
        out = capsys.readouterr().out
        assert option in out and "examples:" in out and f"attnkit caption {action}" in out


def test_train_eval_predict(run, tmp_path, capsys):
    assert (run / "best.safetensors").is_file()
    capsys.readouterr()

    assert main(["caption", "eval", "--run", str(run), "--json"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    metrics = json.loads(last)
    assert {"accuracy", "bleu4", "grounding_mass", "uniform_mass", "grounding_colour_mass",
            "grounding_count_max_inside", "uniform_count_mass", "count_words",
            "grounding_by_word"} <= set(metrics)
    assert sum(r["words"] for r in metrics["grounding_by_word"]) == metrics["grounded_words"]
    assert metrics["examples"] == 4

    report = tmp_path / "eval.html"
    assert main(["caption", "eval", "--run", str(run), "--report", str(report)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    # Without --json the table alone (no JSON line after it, as in the other apps).
    assert "BLEU-4" in out[0] and "(4 images, beam 1)" in out[0]
    assert not any(line.startswith("{") for line in out)
    text = "\n".join(out)
    for row in ("colour words", "count words", "overall", "uniform", "max-in",
                "by caption template and word position"):
        assert row in text
    assert "attention grounding" in report.read_text()

    image = scene_file(tmp_path, mode="L")  # grayscale input
    fig = tmp_path / "fig.png"
    assert main(["caption", "predict", "--run", str(run), str(image), "--plot", str(fig),
                 "--json"]) == 0
    out, err = capsys.readouterr()
    record = json.loads(out.splitlines()[0])
    assert record["words"] and record["image"] == str(image) and record["truncated"] == 0
    assert len(record["weights"]) == len(record["words"]) and f"wrote {fig}" in err
    with Image.open(fig) as im:
        assert im.format == "PNG"


def test_an_eval_of_other_sizes_writes_beside_the_runs_figures(run, capsys):
    """#47: ``caption eval --num-test 1 --pointing`` replaced the run's test_metrics.json
    with one scene's figures."""
    own = (run / "test_metrics.json").read_text()
    assert main(["caption", "eval", "--run", str(run), "--num-test", "1", "--json"]) == 0
    assert (run / "test_metrics.json").read_text() == own
    assert json.loads((run / "test_metrics.examples-1.json").read_text())["examples"] == 1
    capsys.readouterr()


def test_scenes_are_drawn_at_the_models_size(run, tmp_path, capsys):
    """`caption scene --run` draws at the side the run reads (32 here), so predict does not
    resize it; without a run, at the default model's 64 pixels."""
    assert main(["caption", "scene", "--out", str(tmp_path / "d.png")]) == 0
    with Image.open(tmp_path / "d.png") as im:
        assert im.size == (64, 64)
    assert main(["caption", "scene", "--run", str(run), "--out", str(tmp_path / "r.png")]) == 0
    with Image.open(tmp_path / "r.png") as im:
        assert im.size == (32, 32)
    capsys.readouterr()
    assert main(["caption", "predict", "--run", str(run), str(tmp_path / "r.png"),
                 "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["truncated"] == 0 and "resized" not in err
    assert main(["caption", "scene", "--run", str(run), "--size", "48", "--out",
                 str(tmp_path / "s.png")]) == 0
    with Image.open(tmp_path / "s.png") as im:
        assert im.size == (48, 48)                     # --size wins


def test_predict_several_images_from_stdin(run, tmp_path, capsys, monkeypatch):
    images = [scene_file(tmp_path, "a.png"), scene_file(tmp_path, "b.png", size=64)]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{p}\n" for p in images) + "\n"))
    page = tmp_path / "page.html"
    assert main(["caption", "predict", "--run", str(run), "--plot", str(tmp_path / "f.svg"),
                 "--html", str(page)]) == 0
    out, err = capsys.readouterr()
    assert len(out.strip().splitlines()) == 2  # one caption per image
    # The 64 px image was resized to the model's 32 px: a note says so, on stderr.
    notes = [line for line in err.splitlines() if line.startswith("attnkit: note:")]
    assert notes == [f"attnkit: note: image 2: {images[1]}: resized from 64x64 to the model's "
                     "32x32 pixels"]
    assert (tmp_path / "f-1.svg").is_file() and (tmp_path / "f-2.svg").is_file()
    assert page.read_text().count("data:image/png;base64,") == 2


def test_overwrite_and_resume(tmp_path, capsys):
    out = tmp_path / "run"
    assert train(out, "--seed", "2") == 0
    before = snapshot(out)
    assert "already holds a run" in error_line(capsys, ["caption", "train", "--out", str(out),
                                                        *TINY])
    message = error_line(capsys, ["caption", "train", "--resume", str(out), "--seed", "1"])
    assert "--seed 1 differs from the resumed run's 2" in message
    message = error_line(capsys, ["caption", "train", "--resume", str(out), "--attention",
                                  "hard"])
    assert "--attention hard differs" in message
    assert snapshot(out) == before  # refused runs wrote nothing

    # A resume keeps the stored seed and data, and applies the new budget.
    assert main(["caption", "train", "--resume", str(out), "--epochs", "2", "--max-minutes",
                 "3", "--no-progress"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["train"]["seed"] == 2 and config["train"]["epochs"] == 2
    assert config["train"]["max_minutes"] == 3 and config["data_settings"]["num_train"] == 8
    assert "will not be bit-identical" not in capsys.readouterr().err   # its own threads

    # #47: another thread count changes the weights: said plainly, in one warning line.
    assert main(["caption", "train", "--resume", str(out), "--epochs", "3", "--threads", "2",
                 "--no-progress"]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "bit-identical" in line]
    assert len(warned) == 1 and warned[0].startswith("attnkit: warning: ")
    assert "trained with 1 CPU thread(s) and resumes with 2" in warned[0]

    assert train(out, "--overwrite", "--seed", "5") == 0
    assert json.loads((out / "config.json").read_text())["train"]["seed"] == 5


def test_a_second_training_into_a_locked_run_fails_at_once(tmp_path, capsys):
    out = tmp_path / "run"
    with RunLock(out):
        message = error_line(capsys, ["caption", "train", "--out", str(out), *TINY])
    assert f"PID {os.getpid()}" in message
    assert sorted(p.name for p in out.iterdir()) == [".lock"]


def _other_app_run(folder):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"app": "sentiment", "format": 2}))
    (folder / "last").mkdir()  # resumable, but not by caption
    return folder


@pytest.mark.parametrize("argv, message", [
    (["train"], "--out RUN"),
    (["train", "--out", "{tmp}/r", "--image-size", "30"], "--image-size must be an integer >= 32"),
    (["train", "--out", "{tmp}/r", "--num-train", "-1"], "--num-train must be an integer >= 1"),
    (["train", "--out", "{tmp}/r", "--threads", "0"], "--threads"),
    (["train", "--out", "{tmp}/r", "--data", "imagenet"], "'synthetic'"),
    (["train", "--out", "{tmp}/r", "--data", "flickr:{tmp}/t.txt:{tmp}/none"],
     "image folder not found"),
    (["train", "--out", "{tmp}/r", "--attention", "sharp"], "invalid choice"),
    (["train", "--resume", "{tmp}/r"], "nothing to resume"),
    (["train", "--resume", "{tmp}/sentiment"], "is a sentiment run, not a caption run"),
    (["eval", "--run", "{tmp}/sentiment"], "is a sentiment run"),
    (["eval", "--run", "{tmp}/none"], "no such run folder"),
    (["predict", "--run", "{tmp}/sentiment", "x.png"], "is a sentiment run"),
])
def test_user_mistakes_are_one_line(tmp_path, capsys, argv, message):
    _other_app_run(tmp_path / "sentiment")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert message in error_line(capsys, ["caption", *argv])
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("content, message", [
    (b"{broken", "not valid JSON"),
    (b'{"app": "caption\xff\xfe"}', "not UTF-8"),
])
def test_broken_config_is_one_line(run, tmp_path, capsys, content, message):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    (copy / "config.json").write_bytes(content)
    assert message in error_line(capsys, ["caption", "eval", "--run", str(copy)])
    assert message in error_line(capsys, ["caption", "predict", "--run", str(copy), "x.png"])


def test_bad_images_and_empty_inputs_are_one_line(run, tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\x00\x01 definitely not a jpeg")
    assert "bad.jpg" in error_line(capsys, ["caption", "predict", "--run", str(run), str(bad)])
    assert "missing.png" in error_line(capsys, ["caption", "predict", "--run", str(run),
                                                str(tmp_path / "missing.png")])
    assert "empty" in error_line(capsys, ["caption", "predict", "--run", str(run), " "])
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n\n"))
    assert "stdin was empty" in error_line(capsys, ["caption", "predict", "--run", str(run)])
    # Outputs that cannot be written: a folder that is a file, an extension no figure has.
    image = scene_file(tmp_path)
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    for plot, message in ((blocked / "fig.png", "cannot write the figure"),
                          (tmp_path / "fig.txt", "a figure is written to a .png")):
        assert message in error_line(capsys, ["caption", "predict", "--run", str(run),
                                              str(image), "--plot", str(plot)])
    assert "cannot write the report" in error_line(capsys, [
        "caption", "eval", "--run", str(run), "--report", str(blocked / "r.html")])


def test_sigterm_stops_cleanly_and_the_run_resumes(tmp_path):
    """SIGTERM before the first evaluation: exit 143, a checkpoint, no best weights yet (and
    no error about them); the resume then finishes with exit 0."""
    out = tmp_path / "run"
    # 600 scenes one at a time: the first evaluation would come after 600 steps; the first
    # train line of metrics.jsonl, after 50, says training is under way.
    cmd = [sys.executable, "-m", "attnkit.cli.main", "caption", "train", "--out", str(out),
           "--num-train", "600", "--num-valid", "2", "--num-test", "2", "--image-size", "32",
           "--batch-size", "1", "--epochs", "5", "--max-minutes", "0", "--device", "cpu",
           "--threads", "1", "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    metrics = out / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not (metrics.exists() and '"train"' in metrics.read_text()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stdout + stderr
    assert "Traceback" not in stdout + stderr and "stopped by SIGTERM" in stderr
    assert (out / "last").is_dir() and not (out / "best.safetensors").exists()

    resumed = subprocess.run([sys.executable, "-m", "attnkit.cli.main", "caption", "train",
                              "--resume", str(out), "--max-minutes", "0.02", "--no-progress"],
                             env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Traceback" not in resumed.stderr and (out / "best.safetensors").is_file()
    config = json.loads((out / "config.json").read_text())
    assert config["data_settings"]["num_train"] == 600 and config["train"]["max_minutes"] == 0.02
