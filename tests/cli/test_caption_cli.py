"""``attnkit caption``: a tiny run end to end through the command line."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from attnkit.cli.main import main
from attnkit.data.scenes import make_scenes

# Small convolutions and per-word steps: a second thread only spins on a shared CPU.
pytestmark = pytest.mark.usefixtures("one_thread")




def test_help_has_examples(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["caption", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "attnkit caption predict" in out
    with pytest.raises(SystemExit):
        main(["caption", "train", "--help"])
    assert "--num-train" in capsys.readouterr().out


def test_train_eval_predict(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["caption", "train", "--out", str(run), "--num-train", "16", "--num-valid", "4",
                 "--num-test", "4", "--epochs", "1", "--batch-size", "8", "--device", "cpu",
                 "--no-progress"]) == 0
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

    assert main(["caption", "eval", "--run", str(run)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert "BLEU-4" in out[0] and json.loads(out[-1])["examples"] == 4
    text = "\n".join(out)
    for row in ("colour words", "count words", "overall", "uniform", "max-in",
                "by caption template and word position"):
        assert row in text

    image = tmp_path / "scene.png"
    Image.fromarray(make_scenes(1, 42)[0].image).convert("L").save(image)  # grayscale input
    fig = tmp_path / "fig.png"
    assert main(["caption", "predict", "--run", str(run), str(image), "--out", str(fig),
                 "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out.splitlines()[0])["words"] and f"wrote {fig}" in out
    with Image.open(fig) as im:
        assert im.format == "PNG"

    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\x00\x01 definitely not a jpeg")
    assert main(["caption", "predict", "--run", str(run), str(bad)]) == 2
    assert "bad.jpg" in capsys.readouterr().err


def test_train_needs_a_folder():
    with pytest.raises(SystemExit, match="--out"):
        main(["caption", "train"])
