"""The limits on what a request may hold: body bytes, texts, characters.

`BodyLimit` caps every body before anything parses it: a ``Content-Length`` over the limit is
answered 413 at once, and a body sent without one (chunked) is counted as it arrives and
stopped at the limit, so no request can make the server buffer more than the limit. The image
route's limit is ``max_image_bytes`` plus room for the multipart form around the file; every
other route's is ``max_body_bytes``. `check_texts` keeps the texts of one request within
``max_texts`` and ``max_chars`` (a batch of many requests is the batcher's to bound).

Example:
    ```python
    app.add_middleware(BodyLimit, limit_of=lambda path: 1 << 20)
    check_texts(["I am cold."], options)
    ```
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from attnkit.server.errors import ApiError, error_response
from attnkit.server.options import ServeOptions

# The multipart form around an uploaded image (boundaries, headers, the other fields).
FORM_OVERHEAD = 64 << 10


def body_limit(options: ServeOptions, path: str) -> int:
    """The most bytes a body sent to ``path`` may have."""
    if path == "/v1/caption":
        return options.max_image_bytes + FORM_OVERHEAD
    return options.max_body_bytes


def too_large(limit: int) -> ApiError:
    return ApiError(413, "body_too_large", f"the request body is over the limit of {limit:,} "
                                           "bytes")


class BodyLimit:
    """Refuses bodies over the limit before they are read (module docstring).

    Args:
        app: the ASGI app inside.
        limit_of: the limit of a path.
    """

    def __init__(self, app: Any, limit_of: Callable[[str], int]):
        self.app, self.limit_of = app, limit_of

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_of(scope["path"])
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            error = too_large(limit) if declared.isdigit() else ApiError(
                400, "bad_request", "the Content-Length header is not a number")
            await error_response(error.status_code, error.code, error.detail)(
                scope, receive, send)
            return
        seen = [0]

        async def counted() -> dict:
            message = await receive()
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > limit:
                    # Raised inside the app's body reading: FastAPI passes an HTTPException
                    # through, and the error handlers answer it (413).
                    raise too_large(limit)
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
