"""Fuzzing the binary readers: ``safe_extract`` (zip / tar / tar.gz) and ``load_image``.
Arbitrary or corrupted bytes raise DataError, never another exception."""

from __future__ import annotations

import importlib.util
import io
import tarfile
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st
from PIL import Image

from attnkit.data.caption_files import load_image
from attnkit.data.download import safe_extract
from attnkit.errors import AttnkitError

_spec = importlib.util.spec_from_file_location("fuzzlib", Path(__file__).with_name("fuzzlib.py"))
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

files = st.lists(st.tuples(st.sampled_from(["a.txt", "d/b.txt", "d/e/c.bin"]),
                           st.binary(max_size=64)), max_size=3)


def _zip(members) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, payload in members:
            # A fixed timestamp: the same examples on every day the suite runs.
            zf.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), payload,
                        zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def _tar(members, mode: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, payload in members:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tf.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


good_archives = st.one_of(files.map(_zip), files.map(lambda m: _tar(m, "w")),
                          files.map(lambda m: _tar(m, "w:gz")))


@settings(fuzz.SETTINGS)
@given(fuzz.any_bytes(good_archives, gzip_too=False))
@example(b"\x1f\x8b\x08\x00e\xf2\x0f")  # a tar.gz cut inside its gzip header
# A zip whose member offset points before the start of the file (seek: OSError EINVAL).
@example(b"PK\x03\x04\x14\x00\x00\x00\x08\x00\x12\x8f\x83]\x16;\x1dt\x0c\x00\x00\x00\n\x00"
         b"\x00\x00\x05\x00\x00\x00a.txtc\xb8[+\x92\xbf\xb3N]\xe7\x03\x00PK\x01\x02\x14\x03\x14"
         b"\x00\x00\x00\x08\x00\x12\x8f\x83]\x16;\x1dt\x0c\x00\x00\x00\n\x00\x00\x00\x05\x00"
         b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x01\x00\x00\x00\x00a.txtPK\x05\x06"
         b"\x00\x00\x00\x00\x01\x00\x01\x003\x00\x00\x00/\x00\x00\x01\x04\x00")
def test_safe_extract_arbitrary_bytes_raise_only_data_error(data):
    with tempfile.TemporaryDirectory(prefix="attnkit-fuzz-") as tmp:
        archive, dest = Path(tmp) / "archive", Path(tmp) / "out"
        archive.write_bytes(data)
        try:
            written = safe_extract(archive, dest)
        except AttnkitError:
            return
        resolved = dest.resolve()
        assert all(resolved in p.parents for p in written)


def _png(mode: str, size: tuple[int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size).save(buf, format="PNG")
    return buf.getvalue()


good_images = st.tuples(st.sampled_from(["RGB", "L", "RGBA", "P"]),
                        st.tuples(st.integers(1, 12), st.integers(1, 12))).map(
    lambda a: _png(*a))


@settings(fuzz.SETTINGS)
@given(fuzz.any_bytes(good_images, gzip_too=False), st.booleans())
def test_load_image_arbitrary_bytes_raise_only_data_error(data, crop):
    with fuzz.temp_file(data, "image.png") as path:
        try:
            image = load_image(path, 8, crop=crop)
        except AttnkitError:
            return
    assert image.shape == (8, 8, 3) and image.dtype == np.uint8
