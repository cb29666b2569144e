"""``POST /v1/translate/stream``: one sentence translated token by token, as Server-Sent Events.

The events, each ``event: NAME`` and one line of JSON ``data``:

* ``start``: ``{"run", "source", "source_tokens"}``: the tokens the attention rows are over;
* ``token``, one per generated token: ``{"index", "token", "weights"}`` (``weights``: its
  attention over ``source_tokens``; null when not asked or the model has none);
* ``final``: ``{"run", "translation", "page"}``: the whole result, as ``/v1/translate`` gives
  it with ``"attention": true`` (``page``: the explorer page, when asked);
* ``error``: ``{"error": {"code", "message"}}`` if the server fails mid-stream.

Decoding is greedy (beam search knows its best hypothesis only at the end). Errors found before
the first event (limits, an unknown run, a full queue, a deadline) are plain JSON errors with
their status, like every other route's: the stream starts only once its decoding has.

Example:
    ```bash
    curl -N localhost:8000/v1/translate/stream -H 'content-type: application/json' \\
         -d '{"text": "I am cold."}'
    ```
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from attnkit.server.api import translation
from attnkit.server.auth import require_key
from attnkit.server.errors import ApiError, error_body
from attnkit.server.gather import Job
from attnkit.server.limits import check_texts
from attnkit.server.runs import ServedRun
from attnkit.server.schemas import ERRORS, TranslateStreamRequest
from attnkit.server.state import ServerState, state_of

log = logging.getLogger("attnkit.server")
router = APIRouter(prefix="/v1", dependencies=[Depends(require_key)], responses=ERRORS,
                   tags=["predict"])


def sse(event: str, data: Any) -> str:
    """One Server-Sent Event (the JSON on one line, as the format needs)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, allow_nan=False)}\n\n"


@router.post("/translate/stream", response_class=StreamingResponse, responses={
    200: {"description": "Server-Sent Events: start, one token per generated token, final",
          "content": {"text/event-stream": {}}}})
async def translate_stream(body: TranslateStreamRequest, request: Request) -> StreamingResponse:
    """Translate one sentence greedily and stream each generated token with its attention row,
    then the whole translation (see the event list above)."""
    state = state_of(request)
    run = state.run_for("translate", body.run)
    if not run.streams:
        raise ApiError(422, "cannot_stream", f"run {run.name!r} does not stream tokens (the "
                       f"{run.info()['engine']} engine); use POST /v1/translate")
    check_texts([body.text], state.options)
    if (body.attention or body.page) and not run.loaded.engine.has_attention:
        raise ApiError(422, "no_attention", f"run {run.name!r} has no attention: stream with "
                       "\"attention\": false (and no \"page\")")
    options = {"attention": "all" if body.page else body.attention,
               "unk_replace": body.unk_replace and run.loaded.engine.has_attention}
    streams = state.streams[run.name]
    job = await streams.submit(body.text, options, state.options.timeout_s)
    return StreamingResponse(_events(state, run, job, body), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache",
                                      "X-Accel-Buffering": "no"})  # no proxy buffering


async def _events(state: ServerState, run: ServedRun, job: Job,
                  body: TranslateStreamRequest) -> AsyncIterator[str]:
    try:
        while True:
            kind, value = await job.events.get()
            if kind == "end":
                return
            if kind == "start":
                yield sse("start", {"run": run.name, "source": body.text,
                                    "source_tokens": value})
            elif kind == "token":
                weights = None if value.weights is None else [
                    round(float(w), 4) for w in value.weights]
                yield sse("token", {"index": value.position, "token": value.token,
                                    "weights": weights})
            elif kind == "final":
                page = await state.page(run, [value]) if body.page else None
                yield sse("final", {"run": run.name, "page": page,
                                    "translation": translation(value, body.attention)})
            else:
                log.error("stream of run %s failed", run.name, exc_info=value)
                yield sse("error", error_body("internal", "the server failed mid-stream; its "
                                                          "log says why"))
    finally:
        job.abandoned = True   # a client that left stops costing decoder steps
        state.streams[run.name].release(job)
