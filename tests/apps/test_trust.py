"""Which explanation the caption and translation pages open on, and the sentence saying why:
`attnkit.explain.trust.best_shown` and the apps' measurements (no model)."""

import json

import numpy as np

from attnkit.apps.caption.trust import MEASURED as POINTING
from attnkit.apps.caption.trust import caption_trust
from attnkit.apps.translate.page import MEASURED as AER
from attnkit.apps.translate.page import explorer_page
from attnkit.apps.translate.prediction import TranslationPrediction
from attnkit.explain.trust import Measured, best_shown

DATA = '<script type="application/json" id="attnkit-data">'


def test_order_follows_the_measure_and_names_a_better_method_left_off():
    m = Measured({"attention": 0.5, "grad-input": 0.7, "integrated-gradients": 0.9}, "acc ↑",
                 "here")
    trust = best_shown(["attention", "grad-input"], m, add="--explain")
    assert trust.method == "grad-input" and trust.order == ("grad-input", "attention")
    assert trust.why.startswith("Shown first: gradient × input, the best measured of the "
                                "methods on this page (here: acc ↑ 0.7")
    assert trust.why.endswith("integrated gradients measured better: add it with --explain "
                              "integrated-gradients.")
    # Lower is better (AER), and an unmeasured method goes last.
    low = Measured({"attention": 60.0, "rollout": 75.0}, "AER ↓", "there", lower=True)
    assert best_shown(["other", "rollout", "attention"], low).order == \
        ("attention", "rollout", "other")


def test_caption_opens_on_the_best_pointer_measured_in_results_md():
    assert caption_trust("/no/such/run", ["attention"]).method == "attention"
    trust = caption_trust("/no/such/run", ["attention", "grad-input", "integrated-gradients"])
    assert trust.order == ("integrated-gradients", "attention", "grad-input")
    assert "method measured best for this app" in trust.why and "0.734" in trust.why
    assert max(POINTING.scores, key=POINTING.scores.get) == "integrated-gradients"


def test_caption_uses_the_runs_own_pointing_game(tmp_path):
    (tmp_path / "test_metrics.json").write_text(json.dumps({"accuracy": 1.0, "pointing": {
        "attention": {"hits": 9, "words": 10, "accuracy": 0.9},
        "integrated-gradients": {"hits": 5, "words": 10, "accuracy": 0.5},
        "random": {"hits": 1, "words": 10, "accuracy": 0.1}}}))
    trust = caption_trust(tmp_path, ["integrated-gradients", "attention"])
    assert trust.order == ("attention", "integrated-gradients")
    assert "this run's caption eval --pointing, 10 words" in trust.why
    assert "random" not in trust.why
    (tmp_path / "test_metrics.json").write_text("{broken")   # read as no measurement
    assert caption_trust(tmp_path, ["integrated-gradients", "attention"]).order[0] == \
        "integrated-gradients"


def test_translation_page_opens_on_the_lowest_aer_and_says_why():
    src, tokens = ["one", "two"], ["un", "deux"]
    w = np.full((2, 2), 0.5)
    pred = TranslationPrediction("one two", src, tokens, "un deux", w, -1.0,
                                 explanations={"rollout": w, "integrated-gradients": w})
    page = explorer_page([pred], {"run": "runs/fr"})
    data = json.loads(page.split(DATA, 1)[1].split("</script>", 1)[0])
    assert data["order"] == ["attention", "integrated-gradients", "rollout"]
    assert min(AER.scores, key=AER.scores.get) == "attention"   # results.md's figures
    assert "Shown first: attention, the method measured best for this app" in page
    assert "AER ↓ 62.4" in page
