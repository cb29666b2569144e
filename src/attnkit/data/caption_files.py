"""Readers for Flickr8k/Flickr30k token files (``name.jpg#k<TAB>caption``) and COCO captions
JSON, each with its image folder, into a `CaptionSet`; `load_image` reads any image as uint8
``[size, size, 3]``. Malformed records raise a `DataError` naming file and line (or JSON
member), or with ``strict=False`` are counted by reason (`CaptionSet.report`). An image name
that leaves the image folder is never opened. Layouts: docs/concepts.md, "Data"."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from attnkit.data.compressed import decode_line, outside_reason, read_data
from attnkit.data.drops import DropReport, parse_json, where
from attnkit.errors import DataError, UsageError

_MISSING = ("error", "skip")


@dataclass(frozen=True)
class CaptionedImage:
    """One image and its reference captions (raw text, stripped)."""

    image: Path
    captions: tuple[str, ...]


@dataclass
class CaptionSet:
    """A reader's ``items`` (images with a caption, in order of first appearance), one message
    per record left out (``problems``; ``drops``: by reason), and the distinct image names not
    found in the folder (``missing_images``)."""

    items: list[CaptionedImage]
    problems: list[str] = field(default_factory=list)
    drops: DropReport = field(default_factory=DropReport)
    missing_images: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)


_MISSING_REASON = "whose image is missing"


class _Collector:
    """Gathers captions per image and applies the strict / missing-image policies."""

    def __init__(self, image_dir: Path, strict: bool, missing_images: str, check_images: bool):
        if missing_images not in _MISSING:
            raise ValueError(f"missing_images must be one of {_MISSING}, got {missing_images!r}")
        if not image_dir.is_dir():
            raise DataError("image folder not found", path=str(image_dir))
        self.image_dir, self.root, self.strict = image_dir, image_dir.resolve(), strict
        self.missing_images, self.check_images = missing_images, check_images
        self.captions: dict[str, list[str]] = {}
        self.image_problem: dict[str, str | None] = {}
        self.result = CaptionSet([])

    def bad(self, reason: str, message: str, path: Path, line: int | None = None, *,
            member: str = "", skip: bool | None = None, place: str | None = None) -> None:
        """Raise ``message`` or (``skip``, default ``not strict``) count the record under
        ``reason`` at ``place`` (default: file:line, or the JSON ``member``)."""
        err = DataError(f"{member}: {message}" if member else message, path=str(path), line=line)
        if not (skip if skip is not None else not self.strict):
            raise err
        self.result.problems.append(str(err))
        self.result.drops.add(reason, place or (f"{path}: {member}" if member
                                                else where(path, line)))

    def add(self, name: str, caption: str, path: Path, line: int | None, member: str = "") -> None:
        """Keep ``caption`` of image ``name`` unless the image is missing or outside the folder;
        ``member`` names a JSON record ("annotations[3]") where there is no line."""
        if name not in self.image_problem:  # why its captions cannot be kept, or None
            why = outside_reason(self.root, name)
            if why is None and self.check_images and not (self.image_dir / name).is_file():
                why = _MISSING_REASON
            self.image_problem[name] = why
        problem = self.image_problem[name]
        if problem is None:
            self.captions.setdefault(name, []).append(caption)
        elif problem == _MISSING_REASON:
            self.bad(_MISSING_REASON, f"image {name!r} not found in {self.image_dir} "
                     "(missing_images='skip' leaves such captions out)", path, line,
                     member=member, skip=self.missing_images == "skip", place=name)
        else:
            # Not a missing file but a name that escapes the folder: either policy may skip it.
            self.bad("whose image name leaves the image folder",
                     f"image name {name!r} {problem}", path, line, member=member,
                     skip=not self.strict or self.missing_images == "skip")

    def finish(self) -> CaptionSet:
        self.result.items = [CaptionedImage(self.image_dir / n, tuple(c))
                             for n, c in self.captions.items()]
        self.result.missing_images = [n for n, why in self.image_problem.items()
                                      if why == _MISSING_REASON]
        return self.result


def read_flickr_tokens(token_file: str | os.PathLike, image_dir: str | os.PathLike, *,
                       strict: bool = True, missing_images: str = "error",
                       check_images: bool = True) -> CaptionSet:
    """Read a Flickr8k/Flickr30k token file (``name.jpg#k<TAB>caption`` per line).

    ``strict``: raise (``path:line: message``) on a malformed line: no tab, no image name, empty
    caption, bad UTF-8. ``missing_images``: "error" or "skip" for captions whose image file is
    absent (the real Flickr8k file names one). ``check_images``: look for each image file at all
    (a name outside ``image_dir`` is always refused)."""
    path = Path(token_file)
    col = _Collector(Path(image_dir), strict, missing_images, check_images)
    for lineno, raw in enumerate(read_data(path).splitlines(), start=1):
        try:
            # A byte-order mark may open the file; anywhere else it is part of the text.
            line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError:
            col.bad("not valid UTF-8", "not valid UTF-8", path, lineno)
            continue
        if not line.strip():
            continue
        if "\t" not in line:
            col.bad("without a tab", "expected 'image#k<TAB>caption', found no tab", path, lineno)
            continue
        key, caption = line.split("\t", 1)
        name = key.strip().split("#", 1)[0].strip()
        caption = caption.strip()
        if not name:
            col.bad("without an image name", "no image name before the tab", path, lineno)
        elif not caption:
            col.bad("with an empty caption", f"empty caption for image {name!r}", path, lineno)
        else:
            col.add(name, caption, path, lineno)
    return col.finish()


def read_coco_captions(json_file: str | os.PathLike, image_dir: str | os.PathLike, *,
                       strict: bool = True, missing_images: str = "error",
                       check_images: bool = True) -> CaptionSet:
    """Read a COCO captions JSON file (``images`` with ``id``/``file_name``, ``annotations``
    with ``image_id``/``caption``). Arguments and errors as in `read_flickr_tokens`; a
    bad record is named by its member, e.g. ``annotations[12]: missing 'caption'``.
    """
    path = Path(json_file)
    col = _Collector(Path(image_dir), strict, missing_images, check_images)
    data = parse_json(decode_line(read_data(path), path, None, True), path=str(path))
    if not isinstance(data, dict) or not all(isinstance(data.get(k), list)
                                             for k in ("images", "annotations")):
        raise DataError("expected an object with 'images' and 'annotations' lists", path=str(path))

    names: dict[object, str] = {}
    for i, img in enumerate(data["images"]):
        # A missing id, or a list/object id (unhashable), cannot key the images.
        if not isinstance(img, dict) or isinstance(img.get("id", []), (list, dict)) \
                or not (isinstance(img.get("file_name"), str) and img["file_name"]):
            col.bad("images without an 'id' or a 'file_name'",
                    "needs 'id' and a non-empty 'file_name'", path, member=f"images[{i}]")
        elif img["id"] in names:
            col.bad("images with a duplicate id", f"duplicate id {img['id']!r}", path,
                    member=f"images[{i}]")
        else:
            names[img["id"]] = img["file_name"]
    for i, ann in enumerate(data["annotations"]):
        member = f"annotations[{i}]"
        if not isinstance(ann, dict) or "image_id" not in ann:
            col.bad("annotations without an 'image_id'", "missing 'image_id'", path, member=member)
        elif not isinstance(ann.get("caption"), str) or not ann["caption"].strip():
            col.bad("annotations with an empty caption", "missing or empty 'caption'", path,
                    member=member)
        elif isinstance(ann["image_id"], (list, dict)) or ann["image_id"] not in names:
            col.bad("annotations whose image_id is not among 'images'",
                    f"image_id {ann['image_id']!r} is not among 'images'", path, member=member)
        else:
            col.add(names[ann["image_id"]], ann["caption"].strip(), path, None, member)
    return col.finish()


# The most pixels an image may have to be decoded (a 40-megapixel photo; pass more explicitly).
MAX_PIXELS = 40_000_000


def load_image(path: str | os.PathLike, size: int, *, crop: bool = False,
               max_pixels: int | None = MAX_PIXELS) -> np.ndarray:
    """Read an image as uint8 ``[size, size, 3]`` RGB (any mode; EXIF rotation applied);
    ``crop``: centre-crop to a square first (else stretch). DataError: unreadable, not an image,
    or over ``max_pixels``, counted from the header before decoding."""
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    try:
        with warnings.catch_warnings():
            # Pillow warns about images over its own limit; the budget below says it in a line.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            opened = Image.open(path)
        with opened as im:
            # JPEG draft mode decodes at 1/2..1/8 scale: a 4000 px photo for a 224 px input.
            im.draft("RGB", (size, size))
            width, height = im.size
            if max_pixels is not None and width * height > max_pixels:
                raise DataError(f"the image is {width} x {height} pixels, more than the "
                                f"{max_pixels:,} attnkit decodes (--max-pixels)", path=str(path))
            im = ImageOps.exif_transpose(im)
            im.load()
            rgb = _to_rgb(im)
    except DataError:
        raise
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError,
            Image.DecompressionBombError) as err:
        raise DataError(f"cannot read image: {err}", path=str(path)) from err
    if crop:
        rgb = ImageOps.fit(rgb, (size, size), Image.Resampling.BICUBIC)
    elif rgb.size != (size, size):
        rgb = rgb.resize((size, size), Image.Resampling.BICUBIC, reducing_gap=3.0)
    return np.asarray(rgb, dtype=np.uint8).copy()


def read_image(image: str | os.PathLike | np.ndarray, size: int, display_size: int,
               max_pixels: int | None = MAX_PIXELS
               ) -> tuple[np.ndarray, np.ndarray, str, tuple[int, int]]:
    """An image to caption (a file or a uint8 ``[H, W, 3]`` array) -> ``(pixels [size, size, 3],
    shown [display_size, display_size, 3], name ("<array>" for an array), (width, height))``;
    DataError for a file that is not an image, UsageError for a malformed array."""
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise UsageError(f"image must be uint8 [H, W, 3], got {image.dtype} "
                             f"{list(image.shape)}")
        pil = Image.fromarray(image)
        return (np.asarray(pil.resize((size, size), Image.Resampling.BICUBIC)),
                np.asarray(pil.resize((display_size, display_size), Image.Resampling.BICUBIC)),
                "<array>", pil.size)
    pixels = load_image(image, size, max_pixels=max_pixels)
    with Image.open(image) as im:
        original = im.size
    return pixels, load_image(image, display_size, max_pixels=max_pixels), str(image), original


def _to_rgb(im: Image.Image) -> Image.Image:
    if im.mode == "P":
        # Palette images may carry transparency; expand it before compositing.
        im = im.convert("RGBA")
    if im.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    if im.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        # Scale 16-bit / float grayscale into 8 bits instead of letting convert() clip it.
        arr = np.asarray(im, dtype=np.float64)
        top = float(arr.max()) if arr.size else 0.0
        # A float image in [0, 1], 8-bit values in a wider type, else the 16-bit range.
        scale = 255.0 if im.mode == "F" and top <= 1.0 else 1.0 if top <= 255.0 else 255 / 65535
        return Image.fromarray(np.clip(arr * scale, 0, 255).astype(np.uint8)).convert("RGB")
    return im.convert("RGB")
