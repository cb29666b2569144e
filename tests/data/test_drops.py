"""DropReport: counts by reason, the first distinct places of each, the printed report."""

from __future__ import annotations

from attnkit.data.drops import BadRecord, DropReport, where
from attnkit.errors import DataError


def test_counts_by_reason_in_order_of_first_appearance():
    drops = DropReport("line", max_examples=2)
    for reason, line in [("without a tab", 4), ("with an empty French side", 7),
                         ("without a tab", 9), ("without a tab", 12)]:
        drops.add(reason, where("fra.txt", line))
    assert drops.total == 4 and drops.count("without a tab") == 3 and drops.count("other") == 0
    assert drops.format("fra.txt") == ("dropped 4 lines of fra.txt:\n"
                                       "  3 without a tab (e.g. fra.txt:4, fra.txt:9)\n"
                                       "  1 with an empty French side (fra.txt:7)")


def test_singular_unit_repeated_place_and_no_source():
    drops = DropReport("caption")
    drops.add("whose image is missing", "a.jpg")
    assert drops.format() == "dropped 1 caption:\n  1 whose image is missing (a.jpg)"
    drops.add("whose image is missing", "a.jpg")   # the same image twice is shown once
    drops.add("whose image is missing")
    assert drops.reasons[0].examples == ["a.jpg"] and drops.reasons[0].count == 3
    assert DropReport().format("x") == ""


def test_add_error_uses_the_bad_record_reason_or_the_bare_message():
    drops = DropReport()
    drops.add_error(BadRecord("with an empty review", "empty review", path="r.csv", line=3))
    drops.add_error(DataError("label must be 0 or 1", path="r.csv", line=5))
    drops.add_error(DataError("missing folder train/pos"))
    assert [(r.reason, r.examples) for r in drops.reasons] == [
        ("with an empty review", ["r.csv:3"]),
        ("label must be 0 or 1", ["r.csv:5"]),
        ("missing folder train/pos", []),
    ]
    assert str(BadRecord("not valid UTF-8", path="r.csv", line=2)) == "r.csv:2: not valid UTF-8"
