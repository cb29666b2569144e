"""Output files a user names (`attnkit.apps.outputs`): the extension says the kind, nothing lands
in a run folder, other kinds of existing files are never replaced, folders that cannot be
written are one line."""

import errno

import pytest

from attnkit.apps.outputs import (
    ALIGNMENTS,
    FIGURE,
    PAGE,
    numbered_paths,
    output_file,
    run_holding,
    write_output,
    writing,
)
from attnkit.errors import UsageError


def test_the_extension_says_the_kind(tmp_path):
    assert output_file(tmp_path / "a.html", PAGE) == tmp_path / "a.html"
    assert output_file(tmp_path / "a.SVG", FIGURE) == tmp_path / "a.SVG"
    for name, kind in (("a.png", PAGE), ("a.html", FIGURE), ("a", PAGE), ("a.json", ALIGNMENTS)):
        with pytest.raises(UsageError, match="is written to a"):
            output_file(tmp_path / name, kind)


def test_an_existing_file_is_replaced_only_when_it_is_that_kind(tmp_path):
    page = write_output(tmp_path / "p.html", PAGE, "<!DOCTYPE html><html></html>")
    assert write_output(page, PAGE, "<!doctype html><p>new") == page      # a page: replaced
    (tmp_path / "notes.html").write_text("my notes")
    with pytest.raises(UsageError, match="not a page"):
        output_file(tmp_path / "notes.html", PAGE)
    (tmp_path / "fake.png").write_bytes(b"GIF89a")
    with pytest.raises(UsageError, match="not a figure"):
        output_file(tmp_path / "fake.png", FIGURE)
    (tmp_path / "a.wa").write_text("0-0 1-2\n2-1\n")
    assert output_file(tmp_path / "a.wa", ALIGNMENTS)
    (tmp_path / "b.txt").write_text("a letter to a friend\n")
    with pytest.raises(UsageError, match="not an alignment file"):
        output_file(tmp_path / "b.txt", ALIGNMENTS)
    (tmp_path / "dir.html").mkdir()
    with pytest.raises(UsageError, match="is a folder"):
        output_file(tmp_path / "dir.html", PAGE)


def _run(folder):
    folder.mkdir()
    (folder / "config.json").write_text('{"app": "translate", "format": 2}')
    (folder / "best.safetensors").write_bytes(b"x")
    (folder / "last").mkdir()
    (folder / "last" / "state.json").write_text("{}")
    (folder / "report.html").write_text("<!doctype html>")
    (folder / "heatmap.png").write_bytes(b"\x89PNG")
    return folder


def test_nothing_a_user_names_lands_in_a_run_folder(tmp_path):
    """#47: ``predict --html RUN/report.html``, ``--plot RUN/heatmap.png`` and files under
    ``RUN/last/`` replaced the run's own files, with exit 0."""
    run = _run(tmp_path / "run")
    for path, kind in ((run / "report.html", PAGE), (run / "heatmap.png", FIGURE),
                       (run / "last" / "p.html", PAGE), (run / "new.html", PAGE),
                       (run / "deeper" / "x.png", FIGURE)):
        with pytest.raises(UsageError, match="inside the run folder"):
            output_file(path, kind)
    (tmp_path / "link").symlink_to(run / "last")
    with pytest.raises(UsageError, match="inside the run folder"):
        output_file(tmp_path / "link" / "p.html", PAGE)
    assert output_file(tmp_path / "run.html", PAGE)                  # beside it: fine
    # The run's own command writes its own page there.
    assert write_output(run / "report.html", PAGE, "<!doctype html>new", run=run)


def test_a_folder_with_any_config_json_is_not_a_run(tmp_path):
    (tmp_path / "config.json").write_text('{"editor": "vim"}')
    assert run_holding(tmp_path / "a.html") is None
    assert output_file(tmp_path / "a.html", PAGE)


def test_write_errors_are_one_line(tmp_path):
    def fail(code):
        def write(path):
            raise OSError(code, "boom")
        return write

    for code, words in ((errno.EROFS, "read-only"), (errno.ENOSPC, "disk is full"),
                        (errno.EACCES, "permission denied")):
        with pytest.raises(UsageError, match=words):
            writing(tmp_path / "x.html", PAGE, fail(code))
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="a file stands where its folder should be"):
        write_output(tmp_path / "file" / "p.html", PAGE, "<!doctype html>")


def test_numbered_paths():
    assert numbered_paths("a.png", 1) == [numbered_paths("a.png", 1)[0]]
    assert [p.name for p in numbered_paths("out/a.png", 3)] == ["a-1.png", "a-2.png", "a-3.png"]
