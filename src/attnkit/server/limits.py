"""The limits on what a request may hold: body bytes, texts, characters, and an uploaded image,
checked before anything decodes it.

`BodyLimit` caps every body before anything parses it: a ``Content-Length`` over the limit is
answered 413 at once, and a body sent without one is counted as it arrives and stopped at the
limit, so no request makes the server buffer more (``--max-body-bytes``; the image route's is
``--max-image-bytes`` and `FORM_OVERHEAD`). FastAPI's own ``max_body_size`` does the same but
answers a declared length over it in plain text, not the API's JSON. `check_texts` keeps one
request's texts within
``max_texts`` and ``max_chars`` (a batch of many requests is the batcher's to bound). A small
file can declare a huge image (a 500 KB PNG of 13,000 x 13,000 pixels decodes to 500 MB):
`checked_image` reads the header only and refuses more than ``max_pixels``. The caption app
then decodes the file (`write_upload`) with the same pixel budget, converting any mode and
orientation as it does for files on disk.

Example:
    ```python
    app.add_middleware(BodyLimit, options=options)
    check_texts(["I am cold."], options)
    fmt = checked_image(data, options)            # "PNG"
    ```
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnkit.server.errors import ApiError, error_response
from attnkit.server.options import ServeOptions

# The multipart form around an uploaded image (boundaries, headers, the other fields).
FORM_OVERHEAD = 64 << 10


class BodyLimit:
    """Refuses bodies over the limit before they are read (module docstring): an ASGI
    middleware around ``app``."""

    def __init__(self, app: Any, options: ServeOptions):
        self.app, self.options = app, options

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.options.max_body_bytes if scope["path"] != "/v1/caption" else (
            self.options.max_image_bytes + FORM_OVERHEAD)
        over = ApiError(413, "body_too_large", f"the request body is over the limit of "
                                               f"{limit:,} bytes")
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            error = over if declared.isdigit() else ApiError(
                400, "bad_request", "the Content-Length header is not a number")
            await error_response(error.status_code, error.code, error.detail)(
                scope, receive, send)
            return
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                # Raised inside FastAPI's body reading, which lets an HTTPException through
                # to the error handlers (413).
                raise over
            return message

        await self.app(scope, counted, send)


def check_texts(texts: Sequence[str], options: ServeOptions, what: str = "text") -> None:
    """One request's texts within the limits.

    Raises:
        ApiError: 413 for more than ``max_texts`` texts or a text over ``max_chars``
            characters (the message names which).
    """
    if len(texts) > options.max_texts:
        raise ApiError(413, "too_many_texts", f"{len(texts)} {what}s in one request; the "
                                              f"limit is {options.max_texts}")
    for i, text in enumerate(texts):
        if len(text) > options.max_chars:
            raise ApiError(413, "text_too_long", f"{what} {i} has {len(text):,} characters; "
                                                 f"the limit is {options.max_chars:,}")


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
