"""The request and response bodies of the API, as pydantic models (the OpenAPI schema is built
from them).

Requests are strict: an unknown field is refused (``extra="forbid"``, so a misspelt
``"atention"`` is an error rather than silently ignored) and so is a value of the wrong type
(``"beam": "5"``; no coercion). Limits that depend on the server's options (texts per
request, characters per text) are checked by the routes and listed by ``GET /v1/models``.

Example:
    ```python
    TranslateRequest.model_validate({"texts": ["I am cold."], "beam": 5, "attention": True})
    ```
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """A request body: unknown fields and ill-typed values refused."""

    model_config = ConfigDict(extra="forbid", strict=True)


RUN = Field(None, description="the name of a loaded run (None: the only run of this app)",
            max_length=100)
PAGE = Field(False, description="also return the app's explorer page (self-contained HTML) "
             "of these inputs")


class TranslateRequest(Strict):
    """``POST /v1/translate``."""

    texts: list[str] = Field(min_length=1, description="the English sentences")
    run: str | None = RUN
    beam: int = Field(1, ge=1, le=32, description="beam size (1: greedy)")
    alpha: float = Field(0.6, ge=0, le=5, description="length penalty of beam search")
    attention: bool = Field(False, description="return each target token's attention over "
                            "the source tokens")
    unk_replace: bool = Field(True, description="replace an output <unk> by the most "
                              "attended source token")
    page: bool = PAGE

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"texts": ["The cat does not see her."], "beam": 5, "attention": True}]})


class TranslateStreamRequest(Strict):
    """``POST /v1/translate/stream``: one sentence, decoded greedily, token by token."""

    text: str = Field(description="the English sentence")
    run: str | None = RUN
    attention: bool = Field(True, description="send each token's attention row")
    unk_replace: bool = Field(True, description="replace an output <unk> by the most "
                              "attended source token")
    page: bool = PAGE

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"text": "The cat does not see her."}]})


class SentimentRequest(Strict):
    """``POST /v1/sentiment``."""

    texts: list[str] = Field(min_length=1, description="the reviews")
    run: str | None = RUN
    attention: bool = Field(True, description="return each token's weight and signed "
                            "contribution")
    page: bool = PAGE

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"texts": ["A slow start, but a moving, beautiful film."]}]})


class PredictRequest(Strict):
    """``POST /v1/predict``: any loaded run whose app reads text (a plugin app's too)."""

    run: str = Field(description="the name of a loaded run", max_length=100)
    texts: list[str] = Field(min_length=1, description="the inputs, as the app reads them")
    attention: bool = Field(True, description="return the attention")
    page: bool = PAGE


class Translation(BaseModel):
    """One translated sentence (`attnkit.apps.translate.TranslationPrediction`)."""

    source: str
    text: str
    tokens: list[str] = Field(description="the output tokens")
    source_tokens: list[str] = Field(description="the tokens the model read")
    score: float = Field(description="log-probability of the output")
    unknown: float = Field(description="share of source tokens unknown to the model")
    truncated: int = Field(description="source tokens cut off (the model reads no more)")
    weights: list[list[float]] | None = Field(
        None, description="[target token][source token] attention, when asked")


class TranslateResponse(BaseModel):
    run: str
    translations: list[Translation]
    page: str | None = None


class Sentiment(BaseModel):
    """One review's sentiment (`attnkit.apps.sentiment.prediction.SentimentPrediction`)."""

    text: str
    prob: float | None = Field(description="P(positive); None for a review without a word "
                               "the model reads")
    label: str = Field(description="positive, negative or empty")
    tokens: list[str]
    weights: list[float] | None = Field(description="each token's share of the decision")
    contributions: list[float] | None = Field(description="each token's signed push towards "
                                              "positive")
    spans: list[list[int] | None] | None = Field(description="where each token is in the text")
    unknown: float
    truncated: int


class SentimentResponse(BaseModel):
    run: str
    results: list[Sentiment]
    page: str | None = None


class Caption(BaseModel):
    """One image's caption (`attnkit.apps.caption.CaptionPrediction`)."""

    image: str = Field(description="the uploaded file's name")
    caption: str
    words: list[str]
    weights: list[list[list[float]]] = Field(description="[word][row][column]: where each "
                                             "word looked, over the model's feature map")
    unknown: float
    truncated: int = Field(description="1 when the image was resized to the model's input")
    original_size: list[int] = Field(description="[width, height]")


class CaptionResponse(BaseModel):
    run: str
    captions: list[Caption]
    page: str | None = None


class PredictResponse(BaseModel):
    run: str
    app: str
    predictions: list[dict[str, Any]]
    page: str | None = None


class ModelInfo(BaseModel):
    name: str
    app: str
    inputs: str = Field(description="what the app reads: sentence, review, image...")
    engine: str | None
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


ERRORS = {status: {"model": ErrorResponse, "description": text} for status, text in (
    (401, "an API key is asked and missing or unknown"),
    (404, "unknown run"),
    (413, "over a limit: body, texts, characters, image bytes or pixels"),
    (422, "a field unknown, missing or of the wrong type; an input the model refuses"),
    (429, "the model's queue is full (see Retry-After)"),
    (503, "no answer within the deadline, or the server is stopping"))}
