"""``POST /v1/translate/stream``: one sentence translated token by token, as Server-Sent Events
(FastAPI's ``EventSourceResponse``).

The events, each ``event: NAME`` and one line of JSON ``data`` (`attnkit.server.schemas`):
``start`` (`StreamStart`: the tokens the attention rows are over), one ``token`` per generated
token (`StreamToken`: its attention over the source tokens, null when not asked), ``final``
(`StreamFinal`: the whole translation as ``/v1/translate`` gives it with ``"attention":
true``), or ``error`` if the server fails mid-stream. Decoding is greedy (beam search knows its
best hypothesis only at the end). Everything that can fail before the first event (limits, an
unknown run, a full queue, a deadline) is checked by the `started` dependency, so it answers a
plain JSON error with its status, like every other route.

Example:
    ```bash
    curl -N localhost:8000/v1/translate/stream -H 'content-type: application/json' \\
         -d '{"text": "I am cold."}'
    ```
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent

from attnkit.server.batching import Job
from attnkit.server.errors import ApiError
from attnkit.server.limits import check_texts
from attnkit.server.loaded_runs import ServedRun
from attnkit.server.routes import KEYED, PREDICT_ERRORS, translation
from attnkit.server.schemas import (
    ErrorResponse,
    StreamEvent,
    StreamFinal,
    StreamStart,
    StreamToken,
    TranslateStreamRequest,
)
from attnkit.server.state import state_of

log = logging.getLogger("attnkit.server")
router = APIRouter(prefix="/v1", dependencies=KEYED, responses=PREDICT_ERRORS,
                   tags=["predict"])


async def started(body: TranslateStreamRequest, request: Request
                  ) -> AsyncIterator[tuple[ServedRun, Job]]:
    """A dependency: the run and the job of a stream whose decoding has started; once the
    stream ends (or its client leaves) the job stops costing decoder steps."""
    state = state_of(request)
    run = state.run_for("translate", body.run)
    if not run.streams:
        raise ApiError(422, "cannot_stream", f"run {run.name!r} does not stream tokens (the "
                       f"{run.info()['engine']} engine); use POST /v1/translate")
    check_texts([body.text], state.options)
    has_attention = run.loaded.engine.has_attention
    if (body.attention or body.page) and not has_attention:
        raise ApiError(422, "no_attention", f"run {run.name!r} has no attention: stream with "
                       "\"attention\": false (and no \"page\")")
    options = {"attention": "all" if body.page else body.attention,
               "unk_replace": body.unk_replace and has_attention}
    streams = state.streams[run.name]
    job = await streams.submit(body.text, options, state.options.timeout_s)
    try:
        yield run, job
    finally:
        job.abandoned = True
        streams.release(job)


@router.post("/translate/stream", response_class=EventSourceResponse, responses={
    200: {"model": StreamEvent, "description": "Server-Sent Events: start, a token per "
          "generated token, final (each event's data: this schema)"}})
async def translate_stream(body: TranslateStreamRequest, request: Request,
                           stream: Annotated[tuple[ServedRun, Job], Depends(started)]
                           ) -> AsyncIterator[ServerSentEvent]:
    """Translate one sentence greedily and stream each generated token with its attention row,
    then the whole translation (see the event list above)."""
    run, job = stream
    while (event := await job.events.get())[0] != "end":
        kind, value = event
        if kind == "start":
            data = StreamStart(run=run.name, source=body.text, source_tokens=value)
        elif kind == "token":
            weights = None if value.weights is None else [round(float(w), 4)
                                                          for w in value.weights]
            data = StreamToken(index=value.position, token=value.token, weights=weights)
        elif kind == "final":
            page = await state_of(request).page(run, [value]) if body.page else None
            data = StreamFinal(run=run.name, page=page,
                               translation=translation(value, body.attention))
        else:
            log.error("stream of run %s failed", run.name, exc_info=value)
            data = ErrorResponse(error={"code": "internal", "message": "the server failed "
                                        "mid-stream; its log says why"})
        yield ServerSentEvent(event=kind, data=data)
