"""Every error the server answers is one JSON shape: ``{"error": {"code", "message"}}``.

`ApiError` (a status, a stable ``code``, a sentence, optional headers) is what the server's
code raises; it is Starlette's ``HTTPException`` so that FastAPI lets it through while it reads
a body. `HANDLERS` map FastAPI's validation errors (422; 400 for a body that is not JSON),
Starlette's 404 and 405, attnkit's errors (422 ``bad_input``) and anything else (500, its
traceback in the log only) onto the same shape.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from attnkit.errors import AttnkitError

log = logging.getLogger("attnkit.server")   # the server's one logger, its modules' too


class ApiError(HTTPException):
    """An error answered as ``{"error": {"code": code, "message": message}}``."""

    def __init__(self, status: int, code: str, message: str,
                 headers: dict[str, str] | None = None):
        super().__init__(status_code=status, detail=message, headers=headers)
        self.code = code


def error_response(status: int, code: str, message: str,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status, headers)


def raw_error(status: int, code: str, message: str, headers: dict[str, str] | None = None
              ) -> bytes:
    """The same error as the bytes of a whole HTTP/1.1 response that closes its connection:
    what the HTTP protocol writes itself, where no app answers."""
    r = error_response(status, code, message, {**(headers or {}), "connection": "close"})
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}".encode(),
             *(b"%s: %s" % kv for kv in r.raw_headers)]
    return b"\r\n".join(lines) + b"\r\n\r\n" + r.body


def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    status, message = exc.status_code, str(exc.detail)
    if isinstance(exc, ApiError):
        return error_response(status, exc.code, message, exc.headers)
    if status == 400 and "json" in request.headers.get("content-type", ""):
        return _not_json()   # FastAPI's answer to a JSON body it could not decode
    if status == 404:
        message = f"no such route: {request.method} {request.url.path}"
    elif status == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    code = HTTPStatus(status).phrase.lower().replace(" ", "_")   # not_found...
    return error_response(status, code, message, exc.headers)


def _not_json() -> JSONResponse:
    return error_response(400, "invalid_json", "the body is not valid JSON in UTF-8")


def _where(loc: tuple[Any, ...]) -> str:
    """``("body", "texts", 2)`` -> ``texts[2]``: where in the request, as a client wrote it."""
    out = ""
    for p in loc:
        if p not in ("body", "query", "path", "header"):
            out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "the request body"


def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return _not_json()
    shown = "; ".join(f"{_where(tuple(e.get('loc', ())))}: {e.get('msg', 'invalid')}"
                      for e in errors[:5])
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return error_response(422, "invalid_request", shown + more)


def _attnkit_error(request: Request, exc: AttnkitError) -> JSONResponse:
    return error_response(422, "bad_input", str(exc).splitlines()[0])


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # Starlette re-raises the exception after this answer, and uvicorn logs its traceback.
    log.error("error answering %s %s: %s", request.method, request.url.path, exc)
    return error_response(500, "internal", "the server failed to answer this request; its "
                                           "log says why")


# FastAPI's ``exception_handlers``: every error of an app in the one JSON shape.
HANDLERS = {HTTPException: _http_error, RequestValidationError: _validation_error,
            AttnkitError: _attnkit_error, Exception: _unexpected}
