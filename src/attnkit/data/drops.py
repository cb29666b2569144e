"""Counting the records a reader leaves out, by reason, with the first few places of each.

A reader that skips a bad record adds it to a `DropReport`, and the app prints one report
(``drops.format("fra.txt")`` -> ``dropped 3 lines of fra.txt:`` then ``2 without a tab (e.g.
fra.txt:4, fra.txt:9)``...). Checks deep in a reader raise `BadRecord`, a DataError carrying
the reason it is counted under; `parse_json` raises one for malformed JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from attnkit.errors import DataError


def where(path, line: int | None = None) -> str:
    """``"path:line"``, or ``"path"`` when the line is unknown (a whole file, a JSON member)."""
    return f"{path}:{line}" if line is not None else str(path)


class BadRecord(DataError):
    """A DataError about one record, carrying the ``reason`` a `DropReport` counts (a phrase that
    reads after a count: "with an empty review"); ``message`` defaults to it."""

    def __init__(self, reason: str, message: str | None = None, *, path: str | None = None,
                 line: int | None = None):
        super().__init__(message or reason, path=path, line=line)
        self.reason = reason


def parse_json(text: str, *, path: str, line: int | None = None) -> Any:
    """``json.loads(text)``; malformed or too deeply nested input (RecursionError) is a
    `BadRecord` "not valid JSON" naming ``path`` and line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = exc.lineno if line is None else line
        raise BadRecord("not valid JSON", f"invalid JSON: {exc.msg} (column {exc.colno})",
                        path=path, line=where) from exc
    except RecursionError as exc:
        raise BadRecord("not valid JSON", "invalid JSON: nested too deeply", path=path,
                        line=line) from exc


@dataclass
class DropReason:
    """One reason records were left out: how many, and the first few places (distinct)."""

    reason: str
    count: int = 0
    examples: list[str] = field(default_factory=list)


@dataclass
class DropReport:
    """Records left out, grouped by reason in order of first appearance; ``unit`` names a record
    ("line", "caption"); each reason keeps ``max_examples`` places."""

    unit: str = "record"
    max_examples: int = 3
    reasons: list[DropReason] = field(default_factory=list)

    def add(self, reason: str, place: str | None = None) -> None:
        """Count one record dropped for ``reason``; keep ``place`` if it is among the first."""
        entry = next((r for r in self.reasons if r.reason == reason), None)
        if entry is None:
            entry = DropReason(reason)
            self.reasons.append(entry)
        entry.count += 1
        if place is not None and len(entry.examples) < self.max_examples \
                and place not in entry.examples:
            entry.examples.append(place)

    def add_error(self, error: DataError) -> None:
        """Count a record refused with ``error``: its `BadRecord` reason, else its message
        (without the ``path:line:`` prefix)."""
        place = where(error.path, error.line) if error.path is not None else None
        self.add(getattr(error, "reason", None) or str(error).removeprefix(f"{place}: "), place)

    @property
    def total(self) -> int:
        """Records dropped, all reasons together."""
        return sum(r.count for r in self.reasons)

    def count(self, reason: str) -> int:
        """Records dropped for ``reason`` (0 if none)."""
        return sum(r.count for r in self.reasons if r.reason == reason)

    def format(self, source: str | None = None) -> str:
        """A header naming ``source`` (what was read, if given), then one line per reason;
        ``""`` when nothing was dropped."""
        if not self.reasons:
            return ""
        head = f"dropped {self.total} {self.unit}{'s' * (self.total != 1)}"
        lines = [head + (f" of {source}:" if source else ":")]
        for r in self.reasons:
            shown = f" ({'e.g. ' if r.count > 1 else ''}{', '.join(r.examples)})"
            lines.append(f"  {r.count} {r.reason}{shown if r.examples else ''}")
        return "\n".join(lines)
