"""``GET /``: the live page. Pick a loaded run, type a sentence or a review or drop an image,
and see the answer in the app's own explorer view.

The page is an explorer page (`attnkit.viz.explorer.explorer_page`: the same styles and
helpers, its data in a JSON block, its DOM built with ``textContent`` only, its own script by
hash and nothing inline) whose body, style and script are the static files beside this module
(``live_page.html``, ``.css``, ``.js``). It talks to this server alone (``connect-src
'self'``). A translation streams from ``/v1/translate/stream``: a grid grows a row per token,
its attention over the source tokens. Every answer then shows the app's explorer page in a
sandboxed frame, which inherits this page's policy: hence the three explorer scripts in it.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from attnkit.server.state import state_of
from attnkit.viz.caption_page import SCRIPT_SOURCE as CAPTION_SCRIPT
from attnkit.viz.explorer import explorer_page, palette_data
from attnkit.viz.palettes import WEIGHTS
from attnkit.viz.sentiment_page import SCRIPT_SOURCE as SENTIMENT_SCRIPT
from attnkit.viz.translation_page import SCRIPT_SOURCE as TRANSLATION_SCRIPT

router = APIRouter(include_in_schema=False)
BODY, CSS, JS = (files(__package__).joinpath(f"live_page.{kind}").read_text(encoding="utf-8")
                 for kind in ("html", "css", "js"))
CSP = {"script-src": [TRANSLATION_SCRIPT, SENTIMENT_SCRIPT, CAPTION_SCRIPT],
       "connect-src": ["'self'"], "img-src": ["blob:"]}
LEGEND = ("Pick a run, type a sentence or a review (or drop an image on a captioning run), "
          "then Run: the answer comes with where the model looked.",
          "A translation streams: each row of the grid is an output word as it is written, each "
          "column a source word, on the explorer's scale (the colour bar): the darker the "
          "cell, the more the model looked at it. The explorer below then shows the whole "
          "answer.")


@router.get("/", response_class=HTMLResponse)
async def live_page(request: Request) -> HTMLResponse:
    """The live page of this server's runs."""
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
