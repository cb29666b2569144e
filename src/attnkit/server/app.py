"""`create_app`: the FastAPI application of ``attnkit serve``, its routes and its live page.

Metrics (outermost), the body limit, the error handlers, the routes (``/healthz``,
``/readyz``, ``/v1/models``, ``/metrics``, the live page at ``/``, and the predictions under
``/v1``), FastAPI's offline API docs at ``/docs``, and a lifespan that starts and stops the
model thread. The live page's files are ``live_page.html``, ``.css`` and ``.js`` beside this
module. What each route and the stream do: docs/guide/serve.md and docs/concepts.md ("The
server").

Example:
    ```python
    with TestClient(create_app(ServeOptions(runs=[parse_run("runs/fr")]))) as client:
        client.post("/v1/translate", json={"texts": ["I am cold."]}).json()
    ```
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from attnkit import __version__
from attnkit.errors import AttnkitError
from attnkit.server import errors
from attnkit.server import schemas as s
from attnkit.server.batching import Job
from attnkit.server.errors import ApiError
from attnkit.server.limits import RequestLimits, check_texts, checked_image
from attnkit.server.loaded_runs import ServedRun, load_runs
from attnkit.server.options import ServeOptions
from attnkit.server.prometheus import MetricsMiddleware
from attnkit.server.state import ServerState, require_key, state_of
from attnkit.viz.caption_page import SCRIPT_SOURCE as CAPTION_SCRIPT
from attnkit.viz.explorer import explorer_page, page_file, palette_data
from attnkit.viz.palettes import WEIGHTS
from attnkit.viz.sentiment_page import SCRIPT_SOURCE as SENTIMENT_SCRIPT
from attnkit.viz.translation_page import SCRIPT_SOURCE as TRANSLATION_SCRIPT

DESCRIPTION = """Trained attnkit runs behind an HTTP API: each answer comes with the attention
that produced it. Errors are `{"error": {"code": ..., "message": ...}}`. The live page is at
`/`."""
log = logging.getLogger("attnkit.server")
KEYED = [Depends(require_key)]
# Every route (path, endpoint, keyed, FastAPI's settings): `create_app` adds each to the app
# itself, since FastAPI walks an included router's routes on every request.
ROUTES: list[tuple[str, Callable[..., Any], bool, dict[str, Any]]] = []
BODY, CSS, JS = (page_file(f"live_page.{kind}", __package__) for kind in ("html", "css", "js"))
CSP = {"script-src": [TRANSLATION_SCRIPT, SENTIMENT_SCRIPT, CAPTION_SCRIPT],
       "connect-src": ["'self'"], "img-src": ["blob:"]}
LEGEND = ("Pick a run, type a sentence or a review (or drop an image on a captioning run), "
          "then Run: the answer comes with where the model looked.",
          "A translation streams: each row of the grid is an output word as it is written, each "
          "column a source word, on the explorer's scale (the colour bar): the darker the "
          "cell, the more the model looked at it. The explorer below then shows the whole "
          "answer.")


def service(path: str, *, methods: tuple[str, ...] = ("GET",), keyed: bool = False,
            responses: dict | None = None, **settings: Any) -> Callable:
    """A decorator: the server's own route ``path`` (``methods``; ``keyed``: asks for a key
    when the server has keys)."""
    return _route(path, keyed, methods=list(methods), tags=["server"],
                  responses={**s.errors(500), **(responses or {})}, **settings)


def predict(path: str, *, responses: dict | None = None, **settings: Any) -> Callable:
    """A decorator: the prediction route ``POST /v1{path}``, keyed."""
    return _route("/v1" + path, True, methods=["POST"], tags=["predict"], responses={
        **s.errors(400, 401, 404, 408, 413, 421, 422, 429, 500, 503), **(responses or {})},
        **settings)


def _route(path: str, keyed: bool, **settings: Any) -> Callable:
    def add(endpoint: Callable) -> Callable:
        ROUTES.append((path, endpoint, keyed, settings))
        return endpoint
    return add


def create_app(options: ServeOptions, runs: dict[str, ServedRun] | None = None) -> FastAPI:
    """The server's application; its state is ``app.state.server`` (`ServerState`).

    Args:
        options: its settings (checked here).
        runs: the runs, already loaded (None: loaded here from ``options.runs``).

    Raises:
        UsageError: options that cannot work.
        CheckpointError: a run that cannot be loaded.
    """
    options.check()
    state = ServerState(options, load_runs(options) if runs is None else runs)
    app = FastAPIOffline(title="attnkit", version=__version__, description=DESCRIPTION,
                         lifespan=state.lifespan, exception_handlers=errors.HANDLERS,
                         redoc_url=None, static_url="/docs/static",
                         swagger_ui_parameters={"validatorUrl": None})
    app.state.server = state
    for path, endpoint, keyed, settings in ROUTES:   # a key is checked only when asked
        app.add_api_route(path, endpoint, dependencies=KEYED if keyed and options.api_keys
                          else None, **settings)
    # Matched in order on every request: the predictions first, then the server's own routes,
    # then the docs' that FastAPI added.
    routes = app.router.routes
    routes[:] = sorted(routes[-len(ROUTES):], key=lambda r: not r.path.startswith("/v1/")) + \
        routes[:-len(ROUTES)]
    app.add_middleware(RequestLimits, options=options)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics,   # added last: outermost
                       access_log=options.access_log)
    return app


@service("/healthz", response_model=s.Status)
async def healthz() -> dict[str, str]:
    """Alive: the process answers (a liveness probe)."""
    return {"status": "ok"}


@service("/readyz", response_model=s.Status, responses=s.errors(503))
async def readyz(request: Request) -> dict[str, str]:
    """Ready: every model loaded, its queues running, no stop begun (503 otherwise)."""
    state = state_of(request)
    if state.draining or not state.ready:
        raise ApiError(503, *(("draining", "the server is stopping") if state.draining else
                              ("not_ready", "the server is starting")))
    return {"status": "ready"}


@service("/v1/models", keyed=True, responses=s.errors(401))
async def models(request: Request) -> s.ModelsResponse:
    """Every loaded run (its app, name, model summary and test metrics) and the limits a
    request must keep."""
    state = state_of(request)
    return s.ModelsResponse(models=[run.info() for run in state.runs.values()],
                            limits=state.options.limits())


@service("/metrics", keyed=True, response_class=PlainTextResponse, responses=s.errors(401))
async def metrics(request: Request) -> Response:
    """The Prometheus text format (`attnkit.server.prometheus`)."""
    return Response(state_of(request).metrics.render(), media_type=CONTENT_TYPE_LATEST)


@service("/favicon.ico", include_in_schema=False)
async def favicon() -> Response:
    return Response(status_code=204)   # no icon, and no 404 in a browser's console


@service("/", methods=("GET", "HEAD"), response_class=HTMLResponse, include_in_schema=False)
async def live_page(request: Request) -> HTMLResponse:
    """The live page of this server's runs (module docstring)."""
    state = state_of(request)
    # "attention": False for a run that computes none (a CTranslate2 export): no page to ask.
    runs = [{"name": r.name, "app": r.app.name, "inputs": r.app.inputs, "streams": r.streams,
             "attention": getattr(r.loaded.engine, "has_attention", True),
             "model": r.loaded.description} for r in state.runs.values()]
    data = {"runs": runs, "keys": bool(state.options.api_keys),
            "limits": state.options.limits(), "palettes": palette_data(WEIGHTS), "seq": WEIGHTS}
    page = explorer_page("attnkit: live", LEGEND, None, body=BODY, data=data, script=JS,
                         css=CSS, csp=CSP)
    return HTMLResponse(page, headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                                       "X-Content-Type-Options": "nosniff",
                                       "Referrer-Policy": "no-referrer"})


def attention_options(run: ServedRun, body: s.TranslationRequest) -> dict[str, Any]:
    """The translate app's options for the attention a request asks (422 if the run has
    none; without it there is nothing to replace an ``<unk>`` from) and its ``split``."""
    engine = run.loaded.engine
    if (body.attention or body.page) and not engine.has_attention:
        raise ApiError(422, "no_attention", f"run {run.name!r} computes no attention (the "
                       f"{engine.name} engine, or a model without): ask without \"attention\" "
                       "and \"page\"")
    return {"attention": "all" if body.page else body.attention, "split": body.split,
            "unk_replace": body.unk_replace and engine.has_attention}


def translation(p: Any, attention: bool) -> dict[str, Any]:
    """A translation as the API answers it (the page's every layer and head left out)."""
    row = p.to_dict()
    row.pop("layer_weights", None)
    if p.sentences:
        row["sentences"] = [translation(q, attention) for q in p.sentences]
    return row if attention else {**row, "weights": None}


@predict("/translate", response_model=s.TranslateResponse)
async def translate(body: s.TranslateRequest, request: Request) -> dict[str, Any]:
    """Translate ``texts``, sentence by sentence; with ``attention``, each target token's
    attention over the source tokens (``weights[target][source]``, each sentence's own)."""
    state = state_of(request)
    run = state.run_for("translate", body.run)
    check_texts(body.texts, state.options)
    options = {"beam": body.beam, "alpha": body.alpha, **attention_options(run, body)}
    preds = await state.submit(run, body.texts, options)
    return {"run": run.name, "page": await state.page(run, preds, body.page),
            "translations": [translation(p, body.attention) for p in preds]}


async def started(body: s.TranslateStreamRequest, request: Request
                  ) -> AsyncIterator[tuple[ServedRun, Job]]:
    """A dependency: the run and job of a stream whose decoding has started; when the stream
    ends or its client leaves, the job stops costing decoder steps."""
    state = state_of(request)
    run = state.run_for("translate", body.run)
    if not run.streams:
        raise ApiError(422, "cannot_stream", f"run {run.name!r} does not stream tokens (the "
                       f"{run.info()['engine']} engine); use POST /v1/translate")
    check_texts([body.text], state.options)
    async with state.streams[run.name].stream(body.text, attention_options(run, body),
                                              state.options.timeout_s) as job:
        yield run, job


@predict("/translate/stream", response_class=EventSourceResponse, responses={200: {
    "model": s.StreamEvent, "description": "Server-Sent Events (start, token..., final), "
    "each one's data this schema"}})
async def translate_stream(body: s.TranslateStreamRequest, request: Request,
                           stream: Annotated[tuple[ServedRun, Job], Depends(started)]
                           ) -> AsyncIterator[ServerSentEvent]:
    """Translate a text greedily, sentence after sentence (as ``/v1/translate`` cuts it),
    sending each sentence's start and each token with its attention row as it is chosen, then
    the whole translation."""
    state = state_of(request)
    run, job = stream
    while (event := await job.events.get())[0] != "end":
        kind, value = event
        if kind in ("start", "token"):   # the app's SentenceStart and StreamedToken
            data = (s.StreamStart(run=run.name, **value.event()) if kind == "start" else
                    s.StreamToken(**value.event()))
        elif kind == "final":
            data = s.StreamFinal(run=run.name, translation=translation(value, body.attention),
                                 page=await state.page(run, [value], body.page))
        else:
            log.error("stream of run %s failed", run.name, exc_info=value)
            data = s.ErrorResponse(error={"code": "internal", "message": "the server failed "
                                          "mid-stream; its log says why"})
        yield ServerSentEvent(event=kind, data=data)


@predict("/sentiment", response_model=s.SentimentResponse)
async def sentiment(body: s.SentimentRequest, request: Request) -> dict[str, Any]:
    """The sentiment of each review: label, P(positive), and (``attention``) each token's
    share, signed contribution and the most faithful method's scores (``shown``, ``why``)."""
    state = state_of(request)
    run = state.run_for("sentiment", body.run)
    check_texts(body.texts, state.options, "review")
    preds = await state.submit(run, body.texts, {"attention": body.attention or body.page})
    results = [p.to_dict() if body.attention else {**p.to_dict(), "weights": None,
               "contributions": None, "explanations": None} for p in preds]
    return {"run": run.name, "results": results,
            "page": await state.page(run, preds, body.page)}


class CaptionForm(BaseModel):
    """``POST /v1/caption``: a multipart form (``-F file=@duck.png``)."""

    model_config = ConfigDict(extra="forbid")
    file: UploadFile = File(description="the image (PNG, JPEG, GIF, BMP, WebP, TIFF...)")
    run: s.RunName | None = None
    beam: int = Field(1, ge=1, le=32, description="beam size (1: greedy)")
    page: bool = Field(False, description="also return the explorer page of the image")


@predict("/caption", response_model=s.CaptionResponse, responses=s.errors(415))
async def caption(form: Annotated[CaptionForm, Form()], request: Request) -> dict[str, Any]:
    """Caption an uploaded image, with where each word looked (a map over the model's feature
    grid). Its header is checked first: bytes, pixels, an image at all."""
    state = state_of(request)
    run = state.run_for("caption" if form.run is None else None, form.run, inputs="image")
    options = state.options
    data = await form.file.read(options.max_image_bytes + 1)
    fmt = checked_image(data, options).lower()
    # The name as sent, cut, and spelt in Unicode whatever bytes the form held.
    name = (form.file.filename or "upload")[-200:].encode("utf-8", "replace").decode()
    with tempfile.TemporaryDirectory(prefix="attnkit-upload-") as folder:
        path = Path(folder, f"upload.{fmt}")
        await run_in_threadpool(path.write_bytes, data)   # the app decodes files
        try:
            preds = await state.submit(run, [str(path)], {"beam_size": form.beam,
                                                          "max_pixels": options.max_pixels})
        except AttnkitError as exc:
            # The app names the file it read: the server's temporary copy, which tells a
            # client where the server keeps files. The client knows it by the name it sent.
            message = str(exc).splitlines()[0].replace(str(path), name).replace(folder, "upload")
            raise ApiError(422, "bad_input", message) from None
        page = await state.page(run, preds, form.page)
    return {"run": run.name, "page": page,
            "captions": [{**p.to_dict(), "image": name} for p in preds]}


@predict("/predict", response_model=s.PredictResponse)
async def predict_any(body: s.PredictRequest, request: Request) -> dict[str, Any]:
    """Predictions of any loaded run whose app reads text (each the app's
    ``Prediction.to_dict``): the route of an app a package adds."""
    state = state_of(request)
    run = state.run_for(None, body.run, inputs="text")
    check_texts(body.texts, state.options, run.app.inputs)
    preds = await state.submit(run, body.texts, {"attention": "all" if body.page
                                                 else body.attention})
    return {"run": run.name, "app": run.app.name, "page": await state.page(run, preds, body.page),
            "predictions": [p.to_dict() for p in preds]}
