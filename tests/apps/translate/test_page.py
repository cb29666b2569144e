"""The translate app's explorer pages from hand-made predictions (no model): which attention a
page shows, what it leaves out, and the run-level figures of a report."""

import numpy as np
import pytest

from attnkit.apps.translate.page import page_metrics, predictions_page
from attnkit.apps.translate.prediction import TranslationPrediction
from attnkit.errors import UsageError


def _pred(tokens=("un", "deux"), weights=True, layers=None, **kw):
    src = ["one", "two", "."]
    w = np.full((len(tokens), len(src)), 1 / len(src)) if weights else None
    return TranslationPrediction("one two .", src, list(tokens), " ".join(tokens), w, -1.5,
                                 layer_weights=layers, **kw)


def test_layer_weights_win_over_the_average_and_unshowable_ones_are_left_out():
    layers = np.random.default_rng(0).dirichlet(np.ones(3), size=(2, 4, 2))   # [L, H, T, S]
    page = predictions_page([_pred(layers=layers), _pred(weights=False), _pred(tokens=()),
                          _pred(unknown=0.5, unknown_words=["one"], word_count=2,
                                truncated=3)], {"run": "runs/fr"})
    assert page.count('"src":["one","two","."]') == 2        # two of four are shown
    assert '"L":2,"H":4' in page and '"L":1,"H":1' in page
    assert "attnkit translate: fr" in page
    assert "1 of the 2 words it read is unknown to the run (one)" in page
    assert "source tokens cut off" in page
    with pytest.raises(UsageError, match="nothing to show"):
        predictions_page([_pred(weights=False)], {})


def test_report_shows_references_chrf_and_the_run_metrics():
    metrics = {"bleu": 27.125, "chrf": 50.0, "sentences": 2, "beam": 5,
               "single_ref": {"bleu": 20.0, "lines": 3},
               "by_length": [{"lengths": "1-5", "n": 2, "bleu": 27.13}],
               "signature": "nrefs:2|case:mixed"}
    shown = page_metrics(metrics)
    assert shown["BLEU"] == "27.12" and shown["BLEU, sources of 1-5 words"] == "27.13 (2)"
    assert shown["BLEU, one reference per line"] == "20.00 (3 lines)"
    page = predictions_page([_pred()], {"run": "r"}, references=[["un deux", "un deux !"]],
                            metrics=metrics)
    assert '"refs":["un deux","un deux !"]' in page
    assert '["chrF","100.0"]' in page and "nrefs:2|case:mixed" in page
