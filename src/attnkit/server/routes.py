"""The routes of the JSON API: the server's own (``/healthz``, ``/readyz``, ``/v1/models``,
``/metrics``) and the predictions (``POST /v1/translate``, ``/v1/sentiment``,
``/v1/caption``, and ``/v1/predict`` for any run whose app reads text: a plugin app's too).

``/healthz`` answers while the process runs (a liveness probe); ``/readyz`` once every model is
loaded and its queues run, and no longer once a stop has begun. A prediction route checks its
request against the limits, names the run (`ServerState.run_for`), hands the inputs to that
run's batcher and answers the app's predictions (``Prediction.to_dict``) as its pydantic
response model, which FastAPI validates; ``"page": true`` adds the app's explorer page of the
inputs (the live page shows it). The ``/v1`` routes and ``/metrics`` ask for a key when the
server has ``--api-keys``.

Example:
    ```bash
    curl -s localhost:8000/v1/translate -H 'content-type: application/json' \\
         -d '{"texts": ["I am cold."], "attention": true}'
    curl -s localhost:8000/v1/caption -F file=@duck.png
    ```
"""

from __future__ import annotations

import tempfile
from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from attnkit.server.errors import ApiError
from attnkit.server.limits import check_texts, checked_image, write_upload
from attnkit.server.schemas import (
    CaptionResponse,
    ModelsResponse,
    PredictRequest,
    PredictResponse,
    RunName,
    SentimentRequest,
    SentimentResponse,
    Status,
    TranslateRequest,
    TranslateResponse,
    errors,
)
from attnkit.server.state import require_key, state_of

PREDICT_ERRORS = errors(400, 401, 404, 413, 422, 429, 500, 503)
KEYED = [Depends(require_key)]
service = APIRouter(tags=["server"], responses=errors(500))
predict = APIRouter(prefix="/v1", dependencies=KEYED, responses=PREDICT_ERRORS,
                    tags=["predict"])


@service.get("/healthz")
async def healthz() -> Status:
    """Alive: the process answers."""
    return Status(status="ok")


@service.get("/readyz", responses=errors(503))
async def readyz(request: Request) -> Status:
    """Ready: every model loaded, its queues running, no stop begun (503 otherwise)."""
    state = state_of(request)
    if state.draining:
        raise ApiError(503, "draining", "the server is stopping")
    if not state.ready:
        raise ApiError(503, "not_ready", "the server is starting")
    return Status(status="ready")


@service.get("/v1/models", dependencies=KEYED, responses=errors(401))
async def models(request: Request) -> ModelsResponse:
    """Every loaded run: its app, name, model summary and test metrics; and the limits a
    request must keep."""
    state = state_of(request)
    return ModelsResponse(models=[run.info() for run in state.runs.values()],
                          limits=state.options.limits())


@service.get("/metrics", dependencies=KEYED, response_class=PlainTextResponse,
             responses=errors(401))
async def metrics(request: Request) -> Response:
    """The Prometheus text format: requests by route and status, latency, batch sizes, queue
    depth."""
    body, content_type = state_of(request).metrics.render()
    return Response(body, media_type=content_type)


@service.get("/favicon.ico", include_in_schema=False)
async def favicon() -> Response:
    """No icon (and no 404 in a browser's console)."""
    return Response(status_code=204)


def translation(p: Any, attention: bool) -> dict[str, Any]:
    """A translation as the API answers it (the page's every layer and head left out)."""
    row = p.to_dict()
    row.pop("layer_weights", None)
    if not attention:
        row["weights"] = None
    return row


@predict.post("/translate")
async def translate(body: TranslateRequest, request: Request) -> TranslateResponse:
    """Translate ``texts``; with ``attention``, each target token's attention over the source
    tokens (``weights[target][source]``)."""
    state = state_of(request)
    run = state.run_for("translate", body.run)
    check_texts(body.texts, state.options)
    engine = run.loaded.engine
    if (body.attention or body.page) and not engine.has_attention:
        raise ApiError(422, "no_attention", f"run {run.name!r} computes no attention (the "
                       f"{engine.name} engine, or a model without): ask without \"attention\" "
                       "and \"page\"")
    # Without attention there is nothing to replace an <unk> from (and no note to print).
    options = {"beam": body.beam, "alpha": body.alpha,
               "unk_replace": body.unk_replace and engine.has_attention,
               "attention": "all" if body.page else body.attention}
    preds = await state.batchers[run.name].submit(body.texts, options, state.options.timeout_s)
    return TranslateResponse(
        run=run.name, page=await state.page(run, preds) if body.page else None,
        translations=[translation(p, body.attention) for p in preds])


@predict.post("/sentiment")
async def sentiment(body: SentimentRequest, request: Request) -> SentimentResponse:
    """The sentiment of each review: label, P(positive), and (``attention``) each token's
    share of the decision and signed contribution."""
    state = state_of(request)
    run = state.run_for("sentiment", body.run)
    check_texts(body.texts, state.options, "review")
    options = {"attention": body.attention or body.page}
    preds = await state.batchers[run.name].submit(body.texts, options, state.options.timeout_s)
    results = [p.to_dict() for p in preds]
    if not body.attention:
        for row in results:
            row["weights"] = row["contributions"] = None
    return SentimentResponse(run=run.name, results=results,
                             page=await state.page(run, preds) if body.page else None)


class CaptionForm(BaseModel):
    """``POST /v1/caption``: a multipart form (``-F file=@duck.png``)."""

    model_config = ConfigDict(extra="forbid")
    file: UploadFile = File(description="the image (PNG, JPEG, GIF, BMP, WebP, TIFF...)")
    run: RunName | None = None
    beam: int = Field(1, ge=1, le=32, description="beam size (1: greedy)")
    page: bool = Field(False, description="also return the explorer page of the image")


@predict.post("/caption", responses=errors(415))
async def caption(form: Annotated[CaptionForm, Form()], request: Request) -> CaptionResponse:
    """Caption an uploaded image, with where each word looked (a map over the model's feature
    grid). The header is checked first: bytes, pixels, an image at all."""
    state = state_of(request)
    run = state.run_for(None, form.run, inputs="image") if form.run else state.run_for(
        "caption", None)
    options = state.options
    data = await form.file.read(options.max_image_bytes + 1)
    fmt = checked_image(data, options)
    with tempfile.TemporaryDirectory(prefix="attnkit-upload-") as folder:
        path = await run_in_threadpool(write_upload, data, fmt, folder)
        preds = await state.batchers[run.name].submit(
            [str(path)], {"beam_size": form.beam, "max_pixels": options.max_pixels},
            options.timeout_s)
        page = await state.page(run, preds) if form.page else None
    # The name as sent, cut, and spelt in Unicode whatever bytes the form held.
    name = (form.file.filename or "upload")[-200:].encode("utf-8", "replace").decode()
    return CaptionResponse(run=run.name, captions=[{**p.to_dict(), "image": name}
                                                   for p in preds], page=page)


@predict.post("/predict")
async def predict_any(body: PredictRequest, request: Request) -> PredictResponse:
    """Predictions of any loaded run whose app reads text (each the app's
    ``Prediction.to_dict``): the route of an app a package adds."""
    state = state_of(request)
    run = state.run_for(None, body.run, inputs="text")
    check_texts(body.texts, state.options, run.app.inputs)
    options = {"attention": "all" if body.page else body.attention}
    preds = await state.batchers[run.name].submit(body.texts, options, state.options.timeout_s)
    return PredictResponse(run=run.name, app=run.app.name,
                           page=await state.page(run, preds) if body.page else None,
                           predictions=[p.to_dict() for p in preds])

