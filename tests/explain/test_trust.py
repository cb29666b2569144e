"""`attnkit.explain.trust.measured_in_run`: a run's own measurement, else the docs figure; a
table that cannot be used is named in one warning line."""

from __future__ import annotations

import json
import warnings

import pytest

from attnkit.explain.trust import Measured, measured_in_run

DOCS = Measured({"attention": 0.5}, "acc ↑", "docs/results.md")


def scores_of(table: dict) -> Measured | None:
    scores = {m: float(v) for m, v in table["scores"].items()}
    return Measured(scores, "acc ↑", "this run") if scores else None


def measured(folder) -> Measured:
    return measured_in_run(folder, "table.json", "a table", scores_of, DOCS)


def test_the_runs_table_is_read_by_measure(tmp_path):
    (tmp_path / "table.json").write_text(json.dumps({"scores": {"grad-input": 0.8}}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = measured(tmp_path)
    assert got.scores == {"grad-input": 0.8} and got.source == "this run"


def test_a_missing_or_empty_table_gives_the_docs_figure_quietly(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert measured(tmp_path) is DOCS                                 # missing
        (tmp_path / "table.json").write_text('{"scores": {}}')
        assert measured(tmp_path) is DOCS                                 # nothing measured


@pytest.mark.parametrize(("text", "named"), [
    ("{not json", "cannot be read"), ("[1, 2]", "cannot be read"),
    ('{"other": 1}', "cannot be read"), ('{"scores": {"a": "x"}}', "cannot be read"),
    ('{"scores": {"a": NaN, "b": 0.5}}', "not finite numbers (a nan)"),
    ('{"scores": {"a": Infinity}}', "not finite numbers (a inf)"),
])
def test_an_unusable_table_is_named_in_one_warning_and_not_used(tmp_path, text, named):
    path = tmp_path / "table.json"
    path.write_text(text)
    with pytest.warns(UserWarning) as caught:
        assert measured(tmp_path) is DOCS
    assert len(caught) == 1
    line = str(caught[0].message)
    assert line.startswith(f"{path}: ") and named in line and "\n" not in line
    assert line.endswith("its figures are not used (docs/results.md instead)")
