"""Parsing JSON from user files with errors that name the file and line."""

from __future__ import annotations

import json
from typing import Any

from attnkit.data.drops import BadRecord


def parse_json(text: str, *, path: str, line: int | None = None) -> Any:
    """``json.loads(text)``, raising DataError naming ``path`` (and line) for any malformed input.

    Deeply nested input makes ``json.loads`` raise RecursionError rather than JSONDecodeError;
    both become DataError here (a `BadRecord`, reason "not valid
    JSON", for readers that count skipped records) so a reader never leaks either.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = exc.lineno if line is None else line
        raise BadRecord("not valid JSON", f"invalid JSON: {exc.msg} (column {exc.colno})",
                        path=path, line=where) from exc
    except RecursionError as exc:
        raise BadRecord("not valid JSON", "invalid JSON: nested too deeply", path=path,
                        line=line) from exc
