"""`attnkit.explain.trust.measured_in_run`: a run's own measurement, else the docs figure."""

from __future__ import annotations

import json

from attnkit.explain.trust import Measured, measured_in_run

DOCS = Measured({"attention": 0.5}, "acc ↑", "docs/results.md")


def scores_of(table: dict) -> Measured | None:
    scores = {m: float(v) for m, v in table["scores"].items()}
    return Measured(scores, "acc ↑", "this run") if scores else None


def test_the_runs_table_is_read_by_measure(tmp_path):
    (tmp_path / "table.json").write_text(json.dumps({"scores": {"grad-input": 0.8}}))
    got = measured_in_run(tmp_path, "table.json", "a table", scores_of, DOCS)
    assert got.scores == {"grad-input": 0.8} and got.source == "this run"


def test_missing_unreadable_out_of_shape_or_empty_tables_give_the_docs_figure(tmp_path):
    def measured() -> Measured:
        return measured_in_run(tmp_path, "table.json", "a table", scores_of, DOCS)

    assert measured() is DOCS                                      # missing
    path = tmp_path / "table.json"
    for text in ("{not json", "[1, 2]", '{"other": 1}', '{"scores": {"a": "x"}}',
                 '{"scores": {}}'):
        path.write_text(text)
        assert measured() is DOCS, text
