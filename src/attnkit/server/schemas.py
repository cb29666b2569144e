"""The API's request and response bodies as pydantic models: the OpenAPI schema is built from
them, and FastAPI validates every answer against its route's model.

Requests are strict: an unknown field is refused (a misspelt ``"atention"`` is an error, not
ignored), so is a value of the wrong type (``"beam": "5"``) and a text that is not Unicode (a
lone surrogate such as ``"\\ud800"``: JSON can spell it, no answer holding it can be encoded).
Limits that depend on the options (texts per request, characters) are the routes' to check.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, RootModel


def unicode_text(text: str) -> str:
    """``text``; a lone surrogate fails here (422), not in the answer's encoding (a 500)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("holds a lone surrogate (such as \\ud800): not Unicode text") from None
    return text


Text = Annotated[str, AfterValidator(unicode_text)]
RunName = Annotated[Text, Field(max_length=100, description="the name of a loaded run")]


class ApiRequest(BaseModel):
    """What every request may ask: strict (module docstring)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    run: RunName | None = Field(None, description="a loaded run's name (None: the only run "
                                "of this app)")
    page: bool = Field(False, description="also return the app's explorer page "
                       "(self-contained HTML)")


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
    beam: int = Field(1, ge=1, le=32, description="beam size (1: greedy)")
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


class Translation(BaseModel):
    """One translated sentence (`attnkit.apps.translate.TranslationPrediction`)."""

    source: str
    text: str
    tokens: list[str] = Field(description="the output words (subword pieces joined)")
    source_tokens: list[str] = Field(description="the words the model read (subword pieces "
                                     "joined)")
    score: float = Field(description="log-probability of the output")
    unknown: float = Field(description="share of the source's words unknown to the run")
    unknown_words: list[str] = Field(description="those words")
    warning: str | None = Field(description="why the translation is likely wrong (words the "
                                "run cannot read, an output stuck in a loop or that the model "
                                "is unsure of), or None")
    truncated: int = Field(description="source tokens cut off (the model reads no more)")
    weights: list[list[float]] | None = Field(description="[target][source] attention over words "
                                              "(a source word sums its pieces, an output word "
                                              "averages them), if asked (a text of several "
                                              "sentences: in sentences)")
    sentences: list[Translation] | None = Field(None, description="a text of several "
                                                "sentences: each one's translation, in order")


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
    explanations: dict[str, list[float]] | None = Field(None, description="other per-token "
                                                        "explanations, by method")
    shown: str = Field("attention", description="the method to read first; why: one sentence")
    why: str | None = None


class SentimentResponse(Answer):
    results: list[Sentiment]


class Caption(BaseModel):
    """One image's caption (`attnkit.apps.caption.CaptionPrediction`)."""

    image: str = Field(description="the uploaded file's name")
    caption: str
    words: list[str]
    weights: list[list[list[float]]] = Field(description="[word][row][column]: where each word "
                                             "looked, over the model's feature map")
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
    decoding: str | None = Field(None, description="compiled or eager: how a Transformer run "
                                 "decodes now (it switches to compiled once that is ready)")
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


WHEN = {400: "the body is not JSON (invalid_json), not a readable form or request "
             "(bad_request), or headers over 16 KiB (headers_too_large)",
        401: "an API key is asked and missing or unknown",
        404: "unknown run",
        408: "the body did not all arrive within the server's --body-timeout",
        413: "over a limit: body, texts, characters, image bytes or pixels",
        415: "the upload is no image this server reads",
        421: "a Host header this server does not answer for (a server without keys)",
        422: "a field unknown, missing, of the wrong type or not Unicode; an input the model "
             "refuses",
        429: "the model's queue is full (see Retry-After)",
        500: "the server failed (its log says why)",
        503: "no answer within the deadline, or the server is starting or stopping"}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's error answers for its OpenAPI ``responses``: JSON, whatever the route's own
    media type (`ErrorResponse` is in the components as a `StreamEvent`)."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    return {s: {"description": WHEN[s], "content": error} for s in statuses}
