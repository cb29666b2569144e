"""Fuzzing the caption readers (Flickr token files, COCO captions JSON): arbitrary bytes raise
nothing but DataError, and with ``strict=False`` every good record is kept and every bad one
counted in ``CaptionSet.drops``."""

from __future__ import annotations

import importlib.util
import json
import tempfile
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from attnkit.data.caption_files import read_coco_captions, read_flickr_tokens
from attnkit.errors import AttnkitError

_spec = importlib.util.spec_from_file_location("fuzzlib", Path(__file__).with_name("fuzzlib.py"))
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

IMAGES = ["a.jpg", "b.jpg", "c.jpg"]  # present in the image folder
name = st.sampled_from(IMAGES)
caption = fuzz.field_text(max_size=20)


def _read(reader, data: bytes, **kwargs):
    """``reader(file holding data, folder holding IMAGES, **kwargs)``."""
    with tempfile.TemporaryDirectory(prefix="attnkit-fuzz-") as tmp:
        images = Path(tmp) / "images"
        images.mkdir()
        for image in IMAGES:
            (images / image).write_bytes(b"not decoded by the readers")
        path = Path(tmp) / "captions"
        path.write_bytes(data)
        return reader(path, images, **kwargs)


def _never_crashes(reader, data: bytes) -> None:
    for kwargs in ({"strict": True}, {"strict": False, "missing_images": "skip"},
                   {"strict": False, "check_images": False}):
        try:
            result = _read(reader, data, **kwargs)
        except AttnkitError:
            continue
        assert all(item.captions and all(c.strip() for c in item.captions)
                   for item in result.items)


# ---------------------------------------------------------------- Flickr token files
good_flickr = st.lists(st.tuples(name, st.integers(0, 4), caption), max_size=6).map(
    lambda rows: "".join(f"{n}#{k}\t{c}\n" for n, k, c in rows).encode()
)


@settings(fuzz.SETTINGS)
@given(fuzz.any_bytes(good_flickr, gzip_too=False))
def test_flickr_arbitrary_bytes_raise_only_data_error(data):
    _never_crashes(read_flickr_tokens, data)


@st.composite
def bad_flickr_line(draw) -> bytes:
    """A non-blank line that must be skipped: no tab, no image name, empty caption, bad UTF-8,
    or an image that is not in the folder (with ``missing_images='skip'``)."""
    c = draw(caption)
    return draw(st.sampled_from([
        c.encode(),                                   # no tab
        f"#0\t{c}".encode(),                          # no image name
        f"{draw(name)}#1\t  ".encode(),               # empty caption
        b"a.jpg#2\tcaf\xe9",                          # Latin-1, not UTF-8
        f"missing.jpg#0\t{c}".encode(),               # image not in the folder
        f"../images/a.jpg#0\t{c}".encode(),           # leaves the folder (and comes back)
        f"/etc/hosts#0\t{c}".encode(),                # absolute
    ]))


@settings(fuzz.SETTINGS)
@given(st.lists(st.one_of(st.tuples(st.just("good"), name, caption),
                          st.tuples(st.just("bad"), bad_flickr_line(), st.just(""))),
                max_size=25),
       st.sampled_from([b"\n", b"\r\n"]))
def test_flickr_good_lines_kept_bad_lines_counted(rows, newline):
    lines, want = [], {}
    for i, (kind, first, text) in enumerate(rows):
        if kind == "good":
            lines.append(f"{first}#{i % 5}\t{text}".encode())
            want.setdefault(first, []).append(text.strip())
        else:
            lines.append(first)
    result = _read(read_flickr_tokens, b"".join(line + newline for line in lines),
                   strict=False, missing_images="skip")
    assert {item.image.name: list(item.captions) for item in result.items} == want
    assert [item.image.name for item in result.items] == list(want)  # first-appearance order
    assert result.drops.total == len(result.problems) == sum(k == "bad" for k, _, _ in rows)


# ---------------------------------------------------------------- COCO captions JSON
def _coco(images: list, annotations: list) -> bytes:
    return json.dumps({"images": images, "annotations": annotations}).encode()


good_coco = st.lists(st.tuples(st.integers(0, 2), caption), max_size=6).map(
    lambda anns: _coco([{"id": i, "file_name": f} for i, f in enumerate(IMAGES)],
                       [{"image_id": i, "caption": c} for i, c in anns])
)


@settings(fuzz.SETTINGS)
@given(fuzz.any_bytes(good_coco, gzip_too=False))
def test_coco_arbitrary_bytes_raise_only_data_error(data):
    _never_crashes(read_coco_captions, data)


# List/object ids raised TypeError (unhashable) before this fuzzing; fixed in captions.py.
@settings(fuzz.SETTINGS)
@given(st.lists(st.one_of(fuzz.json_values,
                          st.fixed_dictionaries({"id": fuzz.json_values,
                                                 "file_name": fuzz.json_values})), max_size=4),
       st.lists(st.one_of(fuzz.json_values,
                          st.fixed_dictionaries({"image_id": fuzz.json_values,
                                                 "caption": fuzz.json_values})), max_size=4))
@example([{"id": [1], "file_name": "a.jpg"}], [{"image_id": {}, "caption": "x"}])
def test_coco_any_json_values_raise_only_data_error(images, annotations):
    _never_crashes(read_coco_captions, _coco(images, annotations))


@st.composite
def coco_record(draw):
    """``(kind, record)`` with kind good (kept) or bad (skipped and counted); images are
    ``bad_image`` / ``unused_image`` (valid, no caption: neither kept nor counted),
    annotations ``good`` / ``bad``."""
    c = draw(caption)
    return draw(st.sampled_from([
        ("good", {"image_id": draw(st.integers(0, 2)), "caption": c}),
        ("good", {"image_id": 1, "caption": c, "id": 7}),
        ("bad", {"caption": c}),                               # no image_id
        ("bad", {"image_id": 0, "caption": "  "}),             # blank caption
        ("bad", {"image_id": 0, "caption": 5}),                # caption not a string
        ("bad", {"image_id": 99, "caption": c}),               # unknown image
        ("bad", {"image_id": [0], "caption": c}),              # unhashable id
        ("bad", [0, c]),                                       # not an object
        ("bad_image", {"id": 0, "file_name": "dup.jpg"}),      # duplicate id
        ("bad_image", {"id": 5}),                              # no file_name
        ("bad_image", {"id": [5], "file_name": "a.jpg"}),      # unhashable id
        ("unused_image", {"id": 6, "file_name": "missing.jpg"}),  # fine while unused
    ]))


@settings(fuzz.SETTINGS)
@given(st.lists(coco_record(), max_size=25))
def test_coco_good_records_kept_bad_records_counted(records):
    images = [{"id": i, "file_name": f} for i, f in enumerate(IMAGES)]
    images += [r for kind, r in records if kind == "bad_image"]
    # Valid images without captions (unique ids: a repeated id would be a duplicate).
    images += [{**r, "id": 100 + i} for i, (kind, r) in enumerate(records)
               if kind == "unused_image"]
    annotations = [r for kind, r in records if kind in ("good", "bad")]
    want: dict[str, list[str]] = {}
    for kind, r in records:
        if kind == "good":
            want.setdefault(IMAGES[r["image_id"]], []).append(r["caption"].strip())
    result = _read(read_coco_captions, _coco(images, annotations), strict=False,
                   missing_images="skip")
    assert {item.image.name: list(item.captions) for item in result.items} == want
    assert result.drops.total == sum(kind in ("bad", "bad_image") for kind, _ in records)
