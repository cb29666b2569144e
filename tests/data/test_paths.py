"""outside_reason: absolute names, '..' parts and symbolic links out of the folder."""

from __future__ import annotations

import os

import pytest

from attnkit.data.paths import outside_reason


@pytest.mark.parametrize("name, why", [
    ("/etc/passwd", "absolute"), ("\\\\server\\share", "absolute"), ("C:/x.jpg", "absolute"),
    ("../x.jpg", "'..'"), ("a/../../x.jpg", "'..'"), ("a\\..\\..\\x.jpg", "'..'"),
])
def test_names_that_leave_the_folder(tmp_path, name, why):
    assert why in outside_reason(tmp_path.resolve(), name)


def test_inside_names_and_symbolic_links(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.jpg").write_bytes(b"x")
    (tmp_path / "secret.txt").write_text("s")
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    os.symlink(tmp_path, root / "updir")
    os.symlink(root / "sub" / "a.jpg", root / "inner.jpg")
    root = root.resolve()
    assert outside_reason(root, "sub/a.jpg") is None
    assert outside_reason(root, "missing.jpg") is None   # absent but inside: the reader decides
    assert outside_reason(root, "inner.jpg") is None     # a link that stays inside
    assert "resolves outside" in outside_reason(root, "link.txt")
    assert "resolves outside" in outside_reason(root, "updir/secret.txt")
