"""`create_app`: the FastAPI application of ``attnkit serve``: its routes, their pydantic
bodies (strict requests; FastAPI validates every answer and builds the OpenAPI schema from them)
and the live page (``live_page.html``, ``.css``, ``.js`` and its legend ``.txt`` beside this
module). What each route does: docs/guide/serve.md and docs/concepts.md ("The server").

Example:
    ```python
    with TestClient(create_app(ServeOptions(runs=[parse_run("runs/fr")]))) as client:
        client.post("/v1/translate", json={"texts": ["I am cold."]}).json()
    ```
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, RootModel
from starlette.concurrency import run_in_threadpool

from attnkit import __version__
from attnkit.errors import AttnkitError
from attnkit.server.batching import Job
from attnkit.server.errors import HANDLERS, ApiError, log
from attnkit.server.limits import RequestLimits, check_texts, checked_image
from attnkit.server.options import ServeOptions
from attnkit.server.prometheus import MetricsMiddleware
from attnkit.server.state import ServedRun, ServerState, load_runs, require_key, state_of
from attnkit.viz.caption_page import SCRIPT_SOURCE as CAPTION_SCRIPT
from attnkit.viz.explorer import explorer_page, page_file, palette_data
from attnkit.viz.palettes import WEIGHTS
from attnkit.viz.sentiment_page import SCRIPT_SOURCE as SENTIMENT_SCRIPT
from attnkit.viz.translation_page import SCRIPT_SOURCE as TRANSLATION_SCRIPT

DESCRIPTION = """Trained attnkit runs behind an HTTP API: each answer comes with the attention
that produced it. Errors are `{"error": {"code": ..., "message": ...}}`. The live page is at
`/`."""
# Every route (path, endpoint, keyed, FastAPI's settings): `create_app` adds each to the app
# itself, since FastAPI walks an included router's routes on every request.
ROUTES: list[tuple[str, Callable[..., Any], bool, dict[str, Any]]] = []
BODY, CSS, JS, LEGEND = (page_file(f"live_page.{kind}", __package__)
                         for kind in ("html", "css", "js", "txt"))
CSP = {"script-src": [TRANSLATION_SCRIPT, SENTIMENT_SCRIPT, CAPTION_SCRIPT],
       "connect-src": ["'self'"], "img-src": ["blob:"]}


def unicode_text(text: str) -> str:
    """``text``; a lone surrogate fails here (422), not in the answer's encoding (a 500)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("holds a lone surrogate (such as \\ud800): not Unicode text") from None
    return text


Text = Annotated[str, AfterValidator(unicode_text)]
RunName = Annotated[Text, Field(max_length=100, description="the name of a loaded run")]
Beam = Annotated[int, Field(ge=1, le=32, description="beam size (1: greedy)")]


class ApiRequest(BaseModel):
    """What every request may ask. Strict: an unknown field (a misspelt ``"atention"``), a
    value of the wrong type (``"beam": "5"``) and a text that is not Unicode are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)
    run: RunName | None = Field(None, description="a loaded run (None: the app's only run)")
    page: bool = Field(False, description="also return the app's explorer page (HTML)")


class TranslationRequest(ApiRequest):
    """What both translate routes may ask."""

    unk_replace: bool = Field(True, description="replace an output <unk> by the most "
                              "attended source token")
    split: bool = Field(True, description="cut each text into sentences, translate them and "
                        "join them, keeping its paragraphs (false: each text is one sentence)")


class TranslateRequest(TranslationRequest):
    """``POST /v1/translate``."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"texts": ["The cat does not see her."], "beam": 5, "attention": True}]})
    texts: list[Text] = Field(min_length=1, description="the English texts")
    beam: Beam = 1
    alpha: float = Field(0.6, ge=0, le=5, description="length penalty of beam search")
    attention: bool = Field(False, description="each target token's attention over the source")


class TranslateStreamRequest(TranslationRequest):
    """``POST /v1/translate/stream``: a text, decoded greedily, sentence after sentence, token
    by token."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"text": "The cat does not see her."}]})
    text: Text = Field(description="the English text")
    attention: bool = Field(True, description="send each token's attention row")


class SentimentRequest(ApiRequest):
    """``POST /v1/sentiment``."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"texts": ["A slow start, but a moving, beautiful film."]}]})
    texts: list[Text] = Field(min_length=1, description="the reviews")
    attention: bool = Field(True, description="each token's weight and signed contribution")


class PredictRequest(ApiRequest):
    """``POST /v1/predict``: any loaded run whose app reads text (a plugin app's too)."""

    run: RunName
    texts: list[Text] = Field(min_length=1, description="the inputs, as the app reads them")
    attention: bool = Field(True, description="return the attention")


class CaptionForm(BaseModel):
    """``POST /v1/caption``: a multipart form (``-F file=@duck.png``)."""

    model_config = ConfigDict(extra="forbid")
    file: UploadFile = File(description="the image (PNG, JPEG, GIF, BMP, WebP, TIFF...)")
    run: RunName | None = None
    beam: Beam = 1
    page: bool = Field(False, description="also return the explorer page of the image")


class Translation(BaseModel):
    """One translated sentence (`attnkit.apps.translate.TranslationPrediction`)."""

    source: str
    text: str
    tokens: list[str] = Field(description="the output words (subword pieces joined)")
    source_tokens: list[str] = Field(description="the words read (subword pieces joined)")
    score: float = Field(description="log-probability of the output")
    unknown: float = Field(description="share of the source's words unknown to the run")
    unknown_words: list[str] = Field(description="those words")
    warning: str | None = Field(description="why the translation is likely wrong (unknown "
                                "words, a loop, an unsure model), or None")
    truncated: int = Field(description="source tokens cut off (the model reads no more)")
    weights: list[list[float]] | None = Field(description="[target][source] attention over "
                                              "words, if asked (several sentences: in each)")
    sentences: list[Translation] | None = Field(None, description="each sentence's, in order")


class Answer(BaseModel):
    """What every prediction route answers: its run, and its page if asked."""

    run: str
    page: str | None


class TranslateResponse(Answer):
    translations: list[Translation]


class Sentiment(BaseModel):
    """One review's sentiment (`attnkit.apps.sentiment.prediction.SentimentPrediction`)."""

    text: str
    prob: float | None = Field(description="P(positive); None: no word the model reads")
    label: str = Field(description="positive, negative or empty")
    tokens: list[str]
    weights: list[float] | None = Field(description="each token's share of the decision")
    contributions: list[float] | None = Field(description="each token's push towards positive")
    spans: list[list[int] | None] | None = Field(description="where each token is in the text")
    unknown: float
    truncated: int
    explanations: dict[str, list[float]] | None = Field(None, description="by method")
    shown: str = Field("attention", description="the method to read first; why: one sentence")
    why: str | None = None


class SentimentResponse(Answer):
    results: list[Sentiment]


class Caption(BaseModel):
    """One image's caption (`attnkit.apps.caption.CaptionPrediction`)."""

    image: str = Field(description="the uploaded file's name")
    caption: str
    words: list[str]
    weights: list[list[list[float]]] = Field(description="[word][row][column] over the model's "
                                             "feature map")
    unknown: float
    truncated: int = Field(description="1 when the image was resized to the model's input")
    original_size: list[int] = Field(description="[width, height]")


class CaptionResponse(Answer):
    captions: list[Caption]


class PredictResponse(Answer):
    app: str
    predictions: list[dict[str, Any]] = Field(description="each the app's Prediction.to_dict")


class StreamStart(BaseModel):
    """A ``start`` event, one per sentence: the words its attention rows are over."""

    run: str
    sentence: int = Field(description="which sentence of the text, 0 = the first")
    source: str = Field(description="the sentence")
    source_tokens: list[str]


class StreamToken(BaseModel):
    """A ``token`` event, one per output word (a subword run's word once its last piece is
    chosen), with its attention over the source words."""

    sentence: int = Field(description="which sentence of the text, 0 = the first")
    index: int
    token: str
    weights: list[float] | None


class StreamFinal(Answer):
    """The ``final`` event: the whole translation, as ``/v1/translate`` answers it."""

    translation: Translation


class ModelInfo(BaseModel):
    name: str
    app: str
    inputs: str = Field(description="what the app reads: sentence, review, image...")
    engine: str | None
    decoding: str | None = Field(None, description="compiled or eager: how it decodes now")
    streams: bool = Field(description="served by /v1/translate/stream")
    summary: dict[str, Any]
    test_metrics: dict[str, Any] | None


class ModelsResponse(BaseModel):
    models: list[ModelInfo]
    limits: dict[str, float]


class Status(BaseModel):
    status: str


class ErrorDetail(BaseModel):
    code: str = Field(description="stable, for programs (too_many_texts, unknown_run...)")
    message: str = Field(description="for people")


class ErrorResponse(BaseModel):
    error: ErrorDetail


class StreamEvent(RootModel[StreamStart | StreamToken | StreamFinal | ErrorResponse]):
    """The ``data`` of a ``/v1/translate/stream`` event (an ``error`` if the server fails)."""


WHEN = {400: "not JSON (invalid_json), unreadable (bad_request), headers over 16 KiB",
        401: "an API key is asked and missing or unknown",
        404: "unknown run",
        408: "the body did not all arrive within the server's --body-timeout",
        413: "over a limit: body, texts, characters, image bytes or pixels",
        415: "the upload is no image this server reads",
        421: "a Host header this server does not answer for (a server without keys)",
        422: "a field unknown, missing, of the wrong type or not Unicode; an input refused",
        429: "the model's queue is full (see Retry-After)",
        500: "the server failed (its log says why)",
        503: "no answer within the deadline, or the server is starting or stopping"}
PREDICT_ERRORS = (400, 401, 404, 408, 413, 421, 422, 429, 503)


def route(path: str, *errors: int, methods: tuple[str, ...] = ("POST",), keyed: bool = True,
          responses: dict | None = None, **settings: Any) -> Callable:
    """A decorator: ``path`` as a route of the app (`create_app` adds it), answering
    ``errors`` and 500 as JSON whatever its own media type; ``keyed``: asks for a key when
    the server has keys. A POST is tagged a prediction."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    settings.update(methods=list(methods), tags=["predict" if methods == ("POST",) else "server"],
                    responses={**{s: {"description": WHEN[s], "content": error}
                                  for s in (*errors, 500)}, **(responses or {})})

    def add(endpoint: Callable) -> Callable:
        ROUTES.append((path, endpoint, keyed, settings))
        return endpoint
    return add


def create_app(options: ServeOptions, runs: dict[str, ServedRun] | None = None) -> FastAPI:
    """The server's application of ``options`` (checked here) and ``runs`` (None: loaded here);
    its state is ``app.state.server`` (`ServerState`). Raises UsageError or CheckpointError."""
    options.check()
    state = ServerState(options, load_runs(options) if runs is None else runs)
    app = FastAPIOffline(title="attnkit", version=__version__, description=DESCRIPTION,
                         lifespan=state.lifespan, exception_handlers=HANDLERS,
                         redoc_url=None, static_url="/docs/static",
                         swagger_ui_parameters={"validatorUrl": None})
    app.state.server = state
    for path, endpoint, keyed, settings in ROUTES:   # a key is checked only when asked
        app.add_api_route(path, endpoint, **settings, dependencies=[Depends(require_key)]
                          if keyed and options.api_keys else None)
    # Matched in order on every request: the predictions first, then the server's own routes,
    # then the docs' that FastAPI added.
    routes = app.router.routes
    routes[:] = sorted(routes[-len(ROUTES):], key=lambda r: not r.path.startswith("/v1/")) + \
        routes[:-len(ROUTES)]
    app.add_middleware(RequestLimits, options=options)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics,   # added last: outermost
                       access_log=options.access_log)
    return app


@route("/healthz", methods=("GET",), keyed=False, response_model=Status)
async def healthz() -> dict[str, str]:
    """Alive: the process answers (a liveness probe)."""
    return {"status": "ok"}


@route("/readyz", 503, methods=("GET",), keyed=False, response_model=Status)
async def readyz(request: Request) -> dict[str, str]:
    """Ready: every model loaded, its queues running, no stop begun (503 otherwise)."""
    state = state_of(request)
    if state.draining or not state.ready:
        raise ApiError(503, *(("draining", "the server is stopping") if state.draining else
                              ("not_ready", "the server is starting")))
    return {"status": "ready"}


@route("/v1/models", 401, methods=("GET",))
async def models(request: Request) -> ModelsResponse:
    """Every loaded run (its app, name, model summary and test metrics) and the limits a
    request must keep."""
    state = state_of(request)
    return ModelsResponse(models=[run.info() for run in state.runs.values()],
                          limits=state.options.limits())


@route("/metrics", 401, methods=("GET",), response_class=PlainTextResponse)
async def metrics(request: Request) -> Response:
    """The Prometheus text format (`attnkit.server.prometheus`)."""
    return Response(state_of(request).metrics.render(), media_type=CONTENT_TYPE_LATEST)


@route("/favicon.ico", methods=("GET",), keyed=False, include_in_schema=False)
async def favicon() -> Response:
    return Response(status_code=204)   # no icon, and no 404 in a browser's console


@route("/", methods=("GET", "HEAD"), keyed=False, response_class=HTMLResponse,
       include_in_schema=False)
async def live_page(request: Request) -> HTMLResponse:
    """The live page of this server's runs (module docstring)."""
    state = state_of(request)
    # "attention": False for a run that computes none (a CTranslate2 export): no page to ask.
    runs = [{"name": r.name, "app": r.app.name, "inputs": r.app.inputs, "streams": r.streams,
             "attention": getattr(r.loaded.engine, "has_attention", True),
             "model": r.loaded.description} for r in state.runs.values()]
    data = {"runs": runs, "keys": bool(state.options.api_keys),
            "limits": state.options.limits(), "palettes": palette_data(WEIGHTS), "seq": WEIGHTS}
    page = explorer_page("attnkit: live", tuple(LEGEND.splitlines()), None, body=BODY,
                         data=data, script=JS, css=CSS, csp=CSP)
    return HTMLResponse(page, headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                                       "X-Content-Type-Options": "nosniff",
                                       "Referrer-Policy": "no-referrer"})


def attention_options(run: ServedRun, body: TranslationRequest) -> dict[str, Any]:
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


@route("/v1/translate", *PREDICT_ERRORS, response_model=TranslateResponse)
async def translate(body: TranslateRequest, request: Request) -> dict[str, Any]:
    """Translate ``texts``, sentence by sentence; with ``attention``, each target token's
    attention over the source tokens (``weights[target][source]``, each sentence's own)."""
    state = state_of(request)
    run = state.run_for("translate", body.run)
    check_texts(body.texts, state.options)
    options = {"beam": body.beam, "alpha": body.alpha, **attention_options(run, body)}
    preds = await state.submit(run, body.texts, options)
    return {"run": run.name, "page": await state.page(run, preds, body.page),
            "translations": [translation(p, body.attention) for p in preds]}


async def started(body: TranslateStreamRequest, request: Request
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


@route("/v1/translate/stream", *PREDICT_ERRORS, response_class=EventSourceResponse,
       responses={200: {"model": StreamEvent, "description": "Server-Sent Events (start, "
                        "token..., final), each one's data this schema"}})
async def translate_stream(body: TranslateStreamRequest, request: Request,
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
            data = (StreamStart(run=run.name, **value.event()) if kind == "start" else
                    StreamToken(**value.event()))
        elif kind == "final":
            data = StreamFinal(run=run.name, translation=translation(value, body.attention),
                               page=await state.page(run, [value], body.page))
        else:
            log.error("stream of run %s failed", run.name, exc_info=value)
            data = ErrorResponse(error={"code": "internal", "message": "the server failed "
                                        "mid-stream; its log says why"})
        yield ServerSentEvent(event=kind, data=data)


@route("/v1/sentiment", *PREDICT_ERRORS, response_model=SentimentResponse)
async def sentiment(body: SentimentRequest, request: Request) -> dict[str, Any]:
    """The sentiment of each review: label, P(positive), and (``attention``) each token's
    share, signed contribution and the most faithful method's scores (``shown``, ``why``)."""
    state = state_of(request)
    run = state.run_for("sentiment", body.run)
    check_texts(body.texts, state.options, "review")
    preds = await state.submit(run, body.texts, {"attention": body.attention or body.page})
    results = [p.to_dict() if body.attention else {**p.to_dict(), "weights": None,
               "contributions": None, "explanations": None} for p in preds]
    return {"run": run.name, "results": results, "page": await state.page(run, preds, body.page)}


@route("/v1/caption", *PREDICT_ERRORS, 415, response_model=CaptionResponse)
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


@route("/v1/predict", *PREDICT_ERRORS, response_model=PredictResponse)
async def predict_any(body: PredictRequest, request: Request) -> dict[str, Any]:
    """Predictions of any loaded run whose app reads text (each the app's
    ``Prediction.to_dict``): the route of an app a package adds."""
    state = state_of(request)
    run = state.run_for(None, body.run, inputs="text")
    check_texts(body.texts, state.options, run.app.inputs)
    preds = await state.submit(run, body.texts, {"attention": "all" if body.page
                                                 else body.attention})
    return {"run": run.name, "app": run.app.name, "page": await state.page(run, preds, body.page),
            "predictions": [p.to_dict() for p in preds]}
