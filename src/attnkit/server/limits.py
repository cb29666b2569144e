"""What one request may hold: body bytes, texts, characters, and an image, checked before
anything decodes it.

`BodyLimit` answers a ``Content-Length`` over the limit at once and counts a body sent without
one as it arrives, so no request makes the server buffer more (``--max-body-bytes``; the image
route's is ``--max-image-bytes`` and `FORM_OVERHEAD`). FastAPI's own ``max_body_size`` answers
such a request in plain text, not in the API's JSON. A small file can declare a huge image (a
500 KB PNG of 13,000 x 13,000 pixels decodes to 500 MB): `checked_image` reads the header only.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from typing import Any

from attnkit.server.errors import ApiError, error_response
from attnkit.server.options import ServeOptions

FORM_OVERHEAD = 64 << 10   # the multipart form around an image: boundaries, other fields


class BodyLimit:
    """The ASGI middleware that caps every body (module docstring)."""

    def __init__(self, app: Any, options: ServeOptions):
        self.app, self.options = app, options

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        o = self.options
        limit = o.max_body_bytes if scope["path"] != "/v1/caption" else (
            o.max_image_bytes + FORM_OVERHEAD)
        over = ApiError(413, "body_too_large", f"the request body is over the limit of "
                                               f"{limit:,} bytes")
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            error = over if declared.isdigit() else ApiError(
                400, "bad_request", "the Content-Length header is not a number")
            return await error_response(error.status_code, error.code, error.detail)(
                scope, receive, send)
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise over   # inside FastAPI's body reading: its error handlers answer it
            return message
        await self.app(scope, counted, send)


def check_texts(texts: Sequence[str], options: ServeOptions, what: str = "text") -> None:
    """Raises:
        ApiError: 413 for more than ``max_texts`` texts or one over ``max_chars`` characters.
    """
    if len(texts) > options.max_texts:
        raise ApiError(413, "too_many_texts", f"{len(texts)} {what}s in one request; the "
                                              f"limit is {options.max_texts}")
    for i, text in enumerate(texts):
        if len(text) > options.max_chars:
            raise ApiError(413, "text_too_long", f"{what} {i} has {len(text):,} characters; "
                                                 f"the limit is {options.max_chars:,}")


def checked_image(data: bytes, options: ServeOptions) -> str:
    """The image format of ``data`` (``"PNG"``...), from its header alone.

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
