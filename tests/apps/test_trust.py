"""Which explanation the pages open on, and the sentence saying why: the rule every app shares
(`attnkit.explain.trust.Measured.verdict`, `best_shown`) and the apps' measurements (no model).
"Trust X" needs enough examples and a lead of the stated margin over random and every other
method; otherwise the sentence says that no method can be trusted yet, and why."""

import json

import numpy as np
import pytest

from attnkit.apps.caption.prediction import MEASURED as POINTING
from attnkit.apps.caption.prediction import caption_trust
from attnkit.apps.translate.page import MEASURED as AER
from attnkit.apps.translate.page import predictions_page, translate_trust
from attnkit.apps.translate.prediction import TranslationPrediction
from attnkit.explain.trust import Measured, best_shown, shown_order
from attnkit.models.config import RNNSeq2SeqConfig, TransformerConfig

DATA = '<script type="application/json" id="attnkit-data">'
RULE = {"random": 0.1, "count": 500, "margin": 0.02, "min_count": 100, "unit": "words"}


def test_a_method_that_leads_everything_by_the_margin_is_trusted_and_named_when_left_off():
    m = Measured({"attention": 0.5, "grad-input": 0.7, "integrated-gradients": 0.9}, "acc ↑",
                 "here", **RULE)
    assert m.verdict()[0] == "integrated-gradients"
    trust = best_shown(["attention", "grad-input"], m, add="--explain")
    assert trust.startswith("Shown first: gradient × input; integrated gradients is the "
                                "method to trust here (here: acc ↑ 0.9 for integrated gradients, "
                                "0.7 for gradient × input, 0.5 for attention, 0.1 for random)")
    assert trust.endswith(": add it with --explain integrated-gradients.")
    carried = best_shown(["attention", "integrated-gradients"], m)
    assert carried.startswith("Shown first: integrated gradients, the method to trust "
                                  "here: it leads random and every other method by 0.02 or "
                                  "more, on 500 words")


@pytest.mark.parametrize(("scores", "rule", "reason"), [
    # Every method ties (sentiment explain on 1 review).
    ({"attention": 0.3, "grad-input": 0.3}, {"count": 1},
     "the measurement covers 1 words, fewer than the 100 a verdict needs"),
    ({"attention": 0.3, "grad-input": 0.3}, {},
     "attention (0.3) and gradient × input (0.3) are less than 0.02 apart"),
    # --methods attention only, and attention equals random.
    ({"attention": 0.1}, {}, "the best, attention (0.1), does not beat random (0.1) by 0.02"),
    ({"attention": 0.5, "grad-input": 0.51}, {},
     "gradient × input (0.51) and attention (0.5) are less than 0.02 apart"),
    ({"attention": float("nan")}, {}, "some of its figures are not finite numbers"),
])
def test_no_method_is_trusted_without_enough_examples_or_a_clear_lead(scores, rule, reason):
    m = Measured(scores, "acc ↑", "here", **{**RULE, **rule})
    assert m.verdict() == (None, reason)
    trust = best_shown(["grad-input", "attention"], m, add="--explain")
    assert trust.startswith("Shown first: attention, the model's own weights; no method "
                                f"can be trusted yet: {reason} (here")
    assert "trust here" not in trust and "--explain" not in trust


def test_pages_open_on_the_method_asked_first():
    assert shown_order([]) == ("attention",)
    assert shown_order(["integrated-gradients", "rollout"]) == (
        "integrated-gradients", "rollout", "attention")
    assert shown_order(["attention", "rollout"]) == ("attention", "rollout")


def test_caption_names_the_pointer_to_trust_from_results_md():
    assert POINTING.verdict()[0] == "integrated-gradients"   # 0.734, 0.031 ahead of attention
    trust = caption_trust("/no/such/run", ["attention"])
    assert trust.startswith("Shown first: attention; integrated gradients is the method to trust")
    assert "0.734 for integrated gradients" in trust and "0.128 for random" in trust
    assert trust.endswith("add it with --explain integrated-gradients.")


def test_caption_uses_the_runs_own_pointing_game(tmp_path):
    def table(words):
        return {"accuracy": 1.0, "pointing": {
            "attention": {"hits": 0.9 * words, "words": words, "accuracy": 0.9},
            "integrated-gradients": {"hits": 0.5 * words, "words": words, "accuracy": 0.5},
            "random": {"hits": 0.1 * words, "words": words, "accuracy": 0.1}}}

    path = tmp_path / "test_metrics.json"
    path.write_text(json.dumps(table(400)))
    trust = caption_trust(tmp_path, ["integrated-gradients", "attention"])
    assert trust.startswith("Shown first: attention, the method to trust here")
    assert "this run's caption eval --pointing, 400 words" in trust
    path.write_text(json.dumps(table(10)))                   # too few words for a verdict
    assert "covers 10 words, fewer than the 100" in caption_trust(tmp_path, ["attention"])


def test_translation_pages_quote_aer_only_for_a_transformer_and_say_what_it_is():
    # docs/results.md: attention's AER (62.4) is worse than a guess along the diagonal (59).
    assert AER.verdict()[0] is None
    tf = translate_trust(TransformerConfig(src_vocab=10, tgt_vocab=10))
    assert "alignment error rate" in tf and "62.4 for attention" in tf
    assert "does not beat a guess along the diagonal (59)" in tf
    rnn = translate_trust(RNNSeq2SeqConfig(src_vocab=10, tgt_vocab=10))
    assert "62.4" not in rnn and "on a Transformer only, not on an RNN" in rnn
    src, tokens = ["one", "two"], ["un", "deux"]
    w = np.full((2, 2), 0.5)
    pred = TranslationPrediction("one two", src, tokens, "un deux", w, -1.0, why=rnn)
    page = predictions_page([pred], {"run": "runs/fr"})
    assert "on a Transformer only, not on an RNN" in page and "62.4" not in page
    asked = TranslationPrediction("one two", src, tokens, "un deux", w, -1.0,
                                  explanations={"rollout": w, "integrated-gradients": w},
                                  shown="integrated-gradients")
    data = json.loads(predictions_page([asked], {}).split(DATA, 1)[1].split("</script>", 1)[0])
    assert data["order"] == ["integrated-gradients", "rollout", "attention"]
