"""An uploaded image, checked before anything decodes it.

A small file can declare a huge image (a 500 KB PNG of 13,000 x 13,000 pixels decodes to
500 MB): `checked_image` reads the header only and refuses more than ``max_pixels`` (413), a
file over ``max_image_bytes`` (413) and one that is no image Pillow reads (415). The caption
app then decodes it from a file (`write_upload`), with the same pixel budget
(`attnkit.data.captions.load_image`), converting any mode and orientation as it does for files
on disk.

Example:
    ```python
    fmt = checked_image(data, options)            # "PNG"
    with tempfile.TemporaryDirectory() as folder:
        path = write_upload(data, fmt, folder)
    ```
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

from attnkit.server.errors import ApiError
from attnkit.server.options import ServeOptions


def checked_image(data: bytes, options: ServeOptions) -> str:
    """The image format of ``data`` (``"PNG"``, ``"JPEG"``...), from its header alone.

    Raises:
        ApiError: 413 over ``max_image_bytes`` or ``max_pixels``; 415 not an image; 422 empty.
    """
    from PIL import Image, UnidentifiedImageError

    if not data:
        raise ApiError(422, "empty_image", "the uploaded image file is empty")
    if len(data) > options.max_image_bytes:
        raise ApiError(413, "image_too_large", f"the image file has {len(data):,} bytes; the "
                                               f"limit is {options.max_image_bytes:,}")
    try:
        with warnings.catch_warnings():
            # Pillow's own warning for large images: the budget below answers instead.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                width, height, fmt = im.width, im.height, im.format
    except Image.DecompressionBombError as exc:
        raise ApiError(413, "too_many_pixels", f"the image declares too many pixels ({exc})"
                       ) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise ApiError(415, "not_an_image", "the uploaded file is not an image this server "
                                            "reads (PNG, JPEG, GIF, BMP, WebP, TIFF...)") from None
    if width * height > options.max_pixels:
        raise ApiError(413, "too_many_pixels", f"the image is {width} x {height} pixels; the "
                                               f"limit is {options.max_pixels:,} pixels")
    return fmt or "image"


def write_upload(data: bytes, fmt: str, folder: str | Path) -> Path:
    """``data`` as a file in ``folder`` (a private temporary folder), for the app to decode."""
    path = Path(folder) / f"upload.{fmt.lower()}"
    path.write_bytes(data)
    return path
