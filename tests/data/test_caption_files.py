import json

import numpy as np
import pytest
from PIL import Image

from attnkit.data.caption_files import (
    load_image,
    read_coco_captions,
    read_flickr_tokens,
)
from attnkit.errors import DataError


@pytest.fixture
def image_dir(tmp_path):
    d = tmp_path / "images"
    d.mkdir()
    rgb = np.zeros((40, 60, 3), np.uint8)
    rgb[:, :30] = (255, 0, 0)  # left half red, right half blue
    rgb[:, 30:] = (0, 0, 255)
    Image.fromarray(rgb).save(d / "rgb.jpg", quality=95)
    Image.fromarray(np.full((30, 30), 100, np.uint8), mode="L").save(d / "gray.png")
    rgba = np.zeros((20, 20, 4), np.uint8)
    rgba[..., 1] = 255
    rgba[:10, :, 3] = 255  # top half opaque green, bottom half fully transparent
    Image.fromarray(rgba, mode="RGBA").save(d / "rgba.png")
    Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE).save(d / "pal.gif")
    Image.fromarray(np.full((2000, 3000, 3), 77, np.uint8)).save(d / "big.jpg", quality=90)
    (d / "garbage.jpg").write_bytes(b"this is not a jpeg at all")
    good = (d / "rgb.jpg").read_bytes()
    (d / "truncated.jpg").write_bytes(good[: len(good) // 3])
    return d


def test_load_image_converts_modes_and_resizes(image_dir):
    rgb = load_image(image_dir / "rgb.jpg", 16)
    assert rgb.shape == (16, 16, 3) and rgb.dtype == np.uint8
    assert rgb[8, 2, 0] > 200 and rgb[8, 2, 2] < 60  # left still red after resizing
    assert rgb[8, 13, 2] > 200 and rgb[8, 13, 0] < 60  # right still blue
    gray = load_image(image_dir / "gray.png", 8)
    assert gray.shape == (8, 8, 3) and (np.abs(gray.astype(int) - 100) <= 1).all()
    rgba = load_image(image_dir / "rgba.png", 20)
    np.testing.assert_array_equal(rgba[2, 2], [0, 255, 0])  # opaque pixel kept
    np.testing.assert_array_equal(rgba[17, 2], [255, 255, 255])  # transparent -> white
    pal = load_image(image_dir / "pal.gif", 16)
    assert pal.shape == (16, 16, 3) and pal[8, 2, 0] > 200
    big = load_image(image_dir / "big.jpg", 32)
    assert big.shape == (32, 32, 3) and (np.abs(big.astype(int) - 77) <= 3).all()
    assert load_image(image_dir / "rgb.jpg", 10, crop=True).shape == (10, 10, 3)


@pytest.mark.parametrize("name", ["garbage.jpg", "truncated.jpg", "absent.jpg"])
def test_load_image_bad_file_names_it(image_dir, name):
    with pytest.raises(DataError, match=name) as info:
        load_image(image_dir / name, 16)
    assert info.value.path == str(image_dir / name)


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_flickr_tokens_grouped_in_order(tmp_path, image_dir):
    f = _write(tmp_path / "Flickr8k.token.txt",
               "rgb.jpg#0\tA red and blue picture .\n"
               "gray.png#0\tA gray square .\n"
               "\n"
               "rgb.jpg#1\t  Two colours side by side .  \n")
    cs = read_flickr_tokens(f, image_dir)
    assert [it.image.name for it in cs.items] == ["rgb.jpg", "gray.png"]
    assert cs.items[0].captions == ("A red and blue picture .", "Two colours side by side .")
    assert cs.items[0].image == image_dir / "rgb.jpg" and cs.drops.total == 0


@pytest.mark.parametrize(
    "bad, message",
    [("rgb.jpg#2 no tab here", "no tab"), ("#3\tcaption without image", "no image name"),
     ("rgb.jpg#4\t   ", "empty caption")],
)
def test_flickr_malformed_line_names_file_and_line(tmp_path, image_dir, bad, message):
    f = _write(tmp_path / "tok.txt", f"rgb.jpg#0\tfine .\n{bad}\ngray.png#0\talso fine .\n")
    with pytest.raises(DataError, match=rf"tok\.txt:2: .*{message}") as info:
        read_flickr_tokens(f, image_dir)
    assert info.value.line == 2
    cs = read_flickr_tokens(f, image_dir, strict=False)
    assert cs.drops.total == 1 and len(cs) == 2 and "tok.txt:2" in cs.problems[0]


def test_flickr_missing_image(tmp_path, image_dir):
    f = _write(tmp_path / "tok.txt", "rgb.jpg#0\tok .\nnope.jpg.1#0\tmissing .\n")
    with pytest.raises(DataError, match=r"tok\.txt:2: .*nope\.jpg\.1"):
        read_flickr_tokens(f, image_dir)
    cs = read_flickr_tokens(f, image_dir, missing_images="skip")
    assert len(cs) == 1 and cs.drops.total == 1
    assert len(read_flickr_tokens(f, image_dir, check_images=False)) == 2


def test_coco_captions(tmp_path, image_dir):
    data = {
        "images": [{"id": 7, "file_name": "gray.png"}, {"id": 3, "file_name": "rgb.jpg"},
                   {"id": 9, "file_name": "pal.gif"}],
        "annotations": [{"image_id": 3, "id": 1, "caption": "Red and blue.\n"},
                        {"image_id": 7, "id": 2, "caption": "Gray."},
                        {"image_id": 3, "id": 4, "caption": "Two halves."}],
    }
    f = tmp_path / "captions_train2014.json"
    f.write_text(json.dumps(data), encoding="utf-8")
    cs = read_coco_captions(f, image_dir)
    assert [(it.image.name, it.captions) for it in cs.items] == [
        ("rgb.jpg", ("Red and blue.", "Two halves.")), ("gray.png", ("Gray.",))
    ]


def test_coco_errors(tmp_path, image_dir):
    f = tmp_path / "c.json"
    f.write_text('{"images": [\n  {"id": 1,, }\n]}', encoding="utf-8")
    with pytest.raises(DataError, match=r"c\.json:2: invalid JSON"):
        read_coco_captions(f, image_dir)
    f.write_text(json.dumps({"images": [{"id": 1, "file_name": "rgb.jpg"}],
                             "annotations": [{"image_id": 1, "caption": "ok"},
                                             {"image_id": 1},
                                             {"image_id": 5, "caption": "who?"}]}))
    with pytest.raises(DataError, match=r"c\.json: annotations\[1\]: missing or empty 'caption'"):
        read_coco_captions(f, image_dir)
    cs = read_coco_captions(f, image_dir, strict=False)
    assert cs.drops.total == 2 and len(cs) == 1 and "annotations[2]" in cs.problems[1]
    f.write_text("[]")
    with pytest.raises(DataError, match="'images' and 'annotations'"):
        read_coco_captions(f, image_dir)


def test_missing_image_folder(tmp_path):
    f = _write(tmp_path / "Flickr8k.token.txt", "a.jpg#0\ta cap .\n")
    with pytest.raises(DataError, match="image folder not found"):
        read_flickr_tokens(f, tmp_path / "nowhere")


@pytest.fixture
def names_dir(tmp_path):
    """An image folder whose files the readers only look for (never decode)."""
    d = tmp_path / "imgs"
    d.mkdir()
    for name in ("a.jpg", "b.jpg"):
        (d / name).write_bytes(b"not decoded")
    return d


def test_flickr_missing_images_counted_with_their_names(tmp_path, names_dir):
    f = _write(tmp_path / "tok.txt", "a.jpg#0\tok .\ngone.jpg#0\tone .\ngone.jpg#1\ttwo .\n"
                                     "lost.jpg#0\tthree .\nno tab\n")
    cs = read_flickr_tokens(f, names_dir, strict=False, missing_images="skip")
    assert [it.image.name for it in cs.items] == ["a.jpg"]
    assert cs.missing_images == ["gone.jpg", "lost.jpg"]
    assert cs.drops.count("whose image is missing") == 3 and cs.drops.total == 4
    assert cs.drops.format(str(f)) == (f"dropped 4 records of {f}:\n"
                           "  3 whose image is missing (e.g. gone.jpg, lost.jpg)\n"
                           f"  1 without a tab ({f}:5)")
    unchecked = read_flickr_tokens(f, names_dir, strict=False, check_images=False)
    assert unchecked.drops.format(str(f)) == (
        f"dropped 1 record of {f}:\n  1 without a tab ({f}:5)")


@pytest.mark.parametrize("name", ["../outside.jpg", "../imgs/../outside.jpg", "/etc/passwd",
                                  "sub/../../outside.jpg", "link.jpg"])
def test_flickr_names_outside_the_image_folder_are_refused(tmp_path, names_dir, name):
    (tmp_path / "outside.jpg").write_bytes(b"not an image of the data set")
    (names_dir / "link.jpg").symlink_to(tmp_path / "outside.jpg")
    f = _write(tmp_path / "tok.txt", f"a.jpg#0\tfine .\n{name}#0\tescapes .\n")
    for kwargs in ({}, {"check_images": False}):
        with pytest.raises(DataError, match=r"tok\.txt:2: image name .* (absolute|'\.\.'|outs)"):
            read_flickr_tokens(f, names_dir, **kwargs)
    for kwargs in ({"missing_images": "skip"}, {"strict": False}):
        cs = read_flickr_tokens(f, names_dir, **kwargs)
        assert [it.image.name for it in cs.items] == ["a.jpg"] and cs.drops.total == 1
        assert cs.drops.reasons[0].examples == [f"{f}:2"]
        assert cs.missing_images == []


def test_coco_file_name_outside_the_image_folder_is_refused(tmp_path, names_dir):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"images": [{"id": 1, "file_name": "a.jpg"},
                                        {"id": 2, "file_name": "../../etc/passwd"}],
                             "annotations": [{"image_id": 1, "caption": "ok"},
                                             {"image_id": 2, "caption": "escape"}]}))
    with pytest.raises(DataError, match=r"c\.json: annotations\[1\]: image name .* '\.\.'"):
        read_coco_captions(f, names_dir)
    cs = read_coco_captions(f, names_dir, missing_images="skip")
    assert len(cs) == 1 and cs.drops.reasons[0].examples == [f"{f}: annotations[1]"]


def test_coco_missing_image_and_bad_records_reported(tmp_path, names_dir):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"images": [{"id": 1, "file_name": "a.jpg"},
                                        {"id": 2, "file_name": "gone.jpg"}, {"id": 3}],
                             "annotations": [{"image_id": 1, "caption": "ok"},
                                             {"image_id": 2, "caption": "lost"},
                                             {"image_id": 1, "caption": " "}]}))
    cs = read_coco_captions(f, names_dir, strict=False, missing_images="skip")
    assert cs.missing_images == ["gone.jpg"]
    assert cs.drops.format(str(f)) == (f"dropped 3 records of {f}:\n"
                           f"  1 images without an 'id' or a 'file_name' ({f}: images[2])\n"
                           "  1 whose image is missing (gone.jpg)\n"
                           f"  1 annotations with an empty caption ({f}: annotations[2])")


def test_byte_order_mark_accepted_at_the_start_of_every_caption_file(tmp_path, names_dir):
    f = tmp_path / "tok.txt"
    f.write_bytes("\ufeffa.jpg#0\tfirst .\n\ufeffb.jpg#0\tsecond .\n".encode())
    # A mark that opens line 2 is text: that image name does not exist, on line 2.
    with pytest.raises(DataError, match=r"tok\.txt:2: image '\\ufeffb\.jpg' not found"):
        read_flickr_tokens(f, names_dir)
    cs = read_flickr_tokens(f, names_dir, missing_images="skip")
    assert [it.image.name for it in cs.items] == ["a.jpg"]
    j = tmp_path / "c.json"
    j.write_bytes(b"\xef\xbb\xbf" + json.dumps({"images": [{"id": 1, "file_name": "a.jpg"}],
                                                 "annotations": [{"image_id": 1,
                                                                  "caption": "ok"}]}).encode())
    assert read_coco_captions(j, names_dir).items[0].captions == ("ok",)
