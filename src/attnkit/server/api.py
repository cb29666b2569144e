"""The prediction routes: ``POST /v1/translate``, ``/v1/sentiment``, ``/v1/caption`` and
``/v1/predict`` (any loaded run whose app reads text: a plugin app's too).

Each route checks its request against the limits, names the run (`ServerState.run_for`),
hands the inputs to that run's `attnkit.server.batcher.Batcher` and answers with the app's own
predictions (``Prediction.to_dict``); ``"page": true`` adds the app's explorer page of the
inputs (the live page shows it). Responses are written straight to JSON: their pydantic
models document the schema without re-validating every weight on the way out.

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
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from attnkit.server.auth import require_key
from attnkit.server.errors import ApiError
from attnkit.server.images import checked_image, write_upload
from attnkit.server.limits import check_texts
from attnkit.server.schemas import (
    ERRORS,
    CaptionResponse,
    PredictRequest,
    PredictResponse,
    SentimentRequest,
    SentimentResponse,
    TranslateRequest,
    TranslateResponse,
)
from attnkit.server.state import state_of

router = APIRouter(prefix="/v1", dependencies=[Depends(require_key)], responses=ERRORS,
                   tags=["predict"])


def translation(p: Any, attention: bool) -> dict[str, Any]:
    """A translation as the API returns it (the page's every layer and head left out)."""
    row = p.to_dict()
    row.pop("layer_weights", None)
    if not attention:
        row["weights"] = None
    return row


@router.post("/translate", response_model=TranslateResponse)
async def translate(body: TranslateRequest, request: Request) -> JSONResponse:
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
    page = await state.page(run, preds) if body.page else None
    return JSONResponse({"run": run.name, "page": page,
                         "translations": [translation(p, body.attention) for p in preds]})


@router.post("/sentiment", response_model=SentimentResponse)
async def sentiment(body: SentimentRequest, request: Request) -> JSONResponse:
    """The sentiment of each review: label, P(positive), and (``attention``) each token's
    share of the decision and signed contribution."""
    state = state_of(request)
    run = state.run_for("sentiment", body.run)
    check_texts(body.texts, state.options, "review")
    options = {"attention": body.attention or body.page}
    preds = await state.batchers[run.name].submit(body.texts, options, state.options.timeout_s)
    page = await state.page(run, preds) if body.page else None
    results = [p.to_dict() for p in preds]
    if not body.attention:
        for row in results:
            row["weights"] = row["contributions"] = None
    return JSONResponse({"run": run.name, "results": results, "page": page})


class CaptionForm(BaseModel):
    """``POST /v1/caption``: a multipart form (``-F file=@duck.png``)."""

    model_config = ConfigDict(extra="forbid")

    file: UploadFile = File(description="the image (PNG, JPEG, GIF, BMP, WebP, TIFF...)")
    run: str | None = Field(None, max_length=100, description="the name of a loaded run")
    beam: int = Field(1, ge=1, le=32, description="beam size (1: greedy)")
    page: bool = Field(False, description="also return the explorer page of the image")


@router.post("/caption", response_model=CaptionResponse)
async def caption(form: Annotated[CaptionForm, Form()], request: Request) -> JSONResponse:
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
    name = (form.file.filename or "upload")[-200:]
    captions = [{**p.to_dict(), "image": name} for p in preds]
    return JSONResponse({"run": run.name, "captions": captions, "page": page})


@router.post("/predict", response_model=PredictResponse)
async def predict(body: PredictRequest, request: Request) -> JSONResponse:
    """Predictions of any loaded run whose app reads text (each the app's
    ``Prediction.to_dict``): the route of an app a package adds."""
    state = state_of(request)
    run = state.run_for(None, body.run, inputs="text")
    check_texts(body.texts, state.options, run.app.inputs)
    options = {"attention": "all" if body.page else body.attention}
    preds = await state.batchers[run.name].submit(body.texts, options, state.options.timeout_s)
    page = await state.page(run, preds) if body.page else None
    return JSONResponse({"run": run.name, "app": run.app.name, "page": page,
                         "predictions": [p.to_dict() for p in preds]})
