"""Shared fixtures: the real datasets in ../shared/data, when this checkout has them."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def _shared(name: str) -> Path:
    folder = SHARED_DATA / name
    if not (folder / "DONE").exists():
        pytest.skip(f"shared dataset {folder} is absent")
    return folder


@pytest.fixture
def eng_fra_dir() -> Path:
    """``../shared/data/eng-fra`` (train/valid/test .tsv.gz); skips the test where it is absent."""
    return _shared("eng-fra")


@pytest.fixture
def imdb_dir() -> Path:
    """``../shared/data/imdb`` (train/test .jsonl.gz); skips the test where it is absent."""
    return _shared("imdb")
