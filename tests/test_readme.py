"""Every ```python block of the README and of the getting-started page runs as written (the
docs stay true)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
GETTING_STARTED = README.parent / "docs" / "getting-started.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
START = re.findall(r"```python\n(.*?)```", GETTING_STARTED.read_text(encoding="utf-8"),
                   flags=re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})


def test_readme_has_examples():
    assert BLOCKS, "the README lost its Python examples"


@pytest.mark.parametrize("code", START, ids=[f"block{i}" for i in range(len(START))])
def test_getting_started_python_block_runs(code, tmp_path, monkeypatch, one_thread):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(GETTING_STARTED), "exec"), {"__name__": "getting_started"})
