"""``GET /``: the live page. Pick a loaded run, type a sentence or a review or drop an image,
and see the answer in the app's own explorer view.

The page is built like the static explorer pages (`attnkit.viz.explorer.explorer_page`: the
same styles and helpers, the data in a JSON block, the DOM built with ``textContent`` only)
and served with the same kind of policy: its own script by hash, no other origin, nothing
inline. It talks to this server alone (``connect-src 'self'``). A translation streams from
``/v1/translate/stream``: a heatmap grows a row per generated token, each token's attention
over the source tokens, while the sentence is written. Every answer then shows the app's
explorer page (the one ``predict --html`` writes) in a sandboxed frame; the frame inherits
this page's policy, which therefore lists the scripts of the three explorer pages
(`attnkit.viz.translation_page.SCRIPT_SOURCE` and its siblings) and nothing else.

Example:
    ```python
    html = live_page(state)      # what GET / answers
    ```
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from attnkit.server.state import ServerState, state_of
from attnkit.viz.caption_page import SCRIPT_SOURCE as CAPTION_SCRIPT
from attnkit.viz.explorer import explorer_page, palette_data
from attnkit.viz.palettes import WEIGHTS
from attnkit.viz.sentiment_page import SCRIPT_SOURCE as SENTIMENT_SCRIPT
from attnkit.viz.translation_page import SCRIPT_SOURCE as TRANSLATION_SCRIPT

router = APIRouter(include_in_schema=False)

# The page's policy beyond the explorer pages' own (see the module docstring).
CSP = {"script-src": [TRANSLATION_SCRIPT, SENTIMENT_SCRIPT, CAPTION_SCRIPT],
       "connect-src": ["'self'"], "img-src": ["blob:"]}


@router.get("/", response_class=HTMLResponse)
async def index(request: Request) -> HTMLResponse:
    """The live page."""
    return HTMLResponse(live_page(state_of(request)),
                        headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                                 "X-Content-Type-Options": "nosniff",
                                 "Referrer-Policy": "no-referrer"})


def live_page(state: ServerState) -> str:
    """The live page of a server holding ``state``'s runs."""
    # "attention": False for a run that computes none (a CTranslate2 export): no page to ask.
    runs = [{"name": r.name, "app": r.app.name, "inputs": r.app.inputs, "streams": r.streams,
             "attention": getattr(r.loaded.engine, "has_attention", True),
             "model": r.loaded.description} for r in state.runs.values()]
    data = {"runs": runs, "keys": bool(state.options.api_keys),
            "limits": state.options.limits(), "palettes": palette_data(WEIGHTS),
            "seq": WEIGHTS}
    legend = ("Pick a run, type a sentence or a review (or drop an image on a captioning run), "
              "then Run: the answer comes with where the model looked.",
              "A translation streams: each row of the grid is an output word as it is "
              "written, each column a source word; the darker the cell, the more the model "
              "looked at it. The explorer below then shows the whole answer.")
    return explorer_page("attnkit: live", legend, None, body=_BODY, data=data,
                         script=_JS, css=_CSS, csp=CSP)


_BODY = """
<div class="controls">
  <span><label for="run">Run</label> <select id="run"></select></span>
  <span id="key-box" hidden><label for="key">API key</label>
    <input id="key" type="password" size="24" autocomplete="off"></span>
</div>
<p id="model" class="muted"></p>
<div id="text-box">
  <label for="text">Input</label><br>
  <textarea id="text" rows="3" cols="80"></textarea>
</div>
<div id="image-box" hidden>
  <label for="file">Image</label> <input id="file" type="file" accept="image/*">
  <div id="drop" tabindex="0">or drop an image here</div>
</div>
<p><button id="go" type="button">Run</button> <span id="status" class="muted"
   aria-live="polite"></span></p>
<p id="answer" aria-live="polite"></p>
<div class="live-wrap" id="live-wrap" hidden>
  <table id="live" aria-label="attention, growing as the translation is written"></table>
</div>
<iframe id="explorer" title="the explorer page of the answer" sandbox="allow-scripts"
        hidden></iframe>
"""

_CSS = """
textarea { font: inherit; width: 100%; max-width: 60em; }
#drop { border: 2px dashed var(--line); border-radius: 6px; padding: 1.2em; margin: .5em 0;
        max-width: 40em; text-align: center; color: var(--muted); }
#drop.over { border-color: var(--accent); color: var(--accent); }
#answer { font-size: 1.15em; font-weight: 600; min-height: 1.4em; }
.live-wrap { max-height: 50vh; width: fit-content; max-width: 100%; overflow: auto;
             border: 1px solid var(--line); }
#live { border-collapse: separate; border-spacing: 0; font-size: 12px; }
#live td { width: 22px; min-width: 22px; height: 22px; padding: 0;
           border-right: 1px solid #fff; border-bottom: 1px solid #fff; }
#live th { background: #fff; font-weight: normal; white-space: nowrap; padding: 0 4px; }
#live thead th { position: sticky; top: 0; vertical-align: bottom; }
#live thead th.col { writing-mode: vertical-rl; transform: rotate(180deg); max-height: 9em; }
#live th.row { position: sticky; left: 0; text-align: right; }
#explorer { width: 100%; height: 85vh; border: 1px solid var(--line); margin-top: 1em; }
"""

_JS = r"""
function headers(json) {
  const h = {}, key = document.getElementById("key").value.trim();
  if (json) h["content-type"] = "application/json";
  if (key) h["authorization"] = "Bearer " + key;
  return h;
}
const LUT = DATA.palettes[DATA.seq];
const runSel = document.getElementById("run"), text = document.getElementById("text");
const file = document.getElementById("file"), drop = document.getElementById("drop");
const statusLine = document.getElementById("status"), answer = document.getElementById("answer");
const frame = document.getElementById("explorer"), live = document.getElementById("live");
let dropped = null;

DATA.runs.forEach((r, k) => {
  const o = el("option", null, r.name + " (" + r.app + ")"); o.value = k; runSel.append(o);
});
document.getElementById("key-box").hidden = !DATA.keys;
function run() { return DATA.runs[Number(runSel.value)]; }
function pick() {
  const r = run(), image = r.inputs === "image";
  document.getElementById("text-box").hidden = image;
  document.getElementById("image-box").hidden = !image;
  document.getElementById("model").textContent = r.model;
  document.querySelector("label[for=text]").textContent =
    r.app === "translate" ? "English sentence" : r.app === "sentiment" ? "Review" : "Input";
}
runSel.addEventListener("change", pick);
pick();

function say(message) { statusLine.textContent = message; }
async function failure(resp) {
  try {
    const body = await resp.json();
    return resp.status + ": " + body.error.message;
  } catch (e) { return "HTTP " + resp.status; }
}
function showPage(html) {
  frame.hidden = !html;
  frame.srcdoc = html || "";
}
function reset() {
  answer.textContent = ""; showPage(null);
  live.replaceChildren(); document.getElementById("live-wrap").hidden = true;
  live.dataset.rows = "0";
}
async function post(path, body, json) {
  const resp = await fetch(path, {method: "POST", headers: headers(json), body: body});
  if (!resp.ok) throw new Error(await failure(resp));
  return resp.json();
}

function startGrid(sourceTokens) {
  const head = el("thead"), tr = el("tr");
  tr.append(el("th", "corner", "output \\ source"));
  for (const s of sourceTokens) tr.append(el("th", "col", s));
  head.append(tr);
  live.replaceChildren(head, el("tbody"));
  document.getElementById("live-wrap").hidden = false;
}
function growGrid(token, weights, width) {
  const tr = el("tr"), th = el("th", "row", token);
  tr.append(th);
  const top = weights ? Math.max(...weights) || 1 : 1;
  for (let j = 0; j < width; j++) {
    const td = el("td");
    if (weights) {
      paint(td, LUT, weights[j] / top);
      td.title = token + " \u2190 " + fmt(weights[j]);
    }
    tr.append(td);
  }
  live.tBodies[0].append(tr);
  live.dataset.rows = String(live.tBodies[0].rows.length);
}
function events(buffer, handle) {
  let cut;
  while ((cut = buffer.indexOf("\n\n")) >= 0) {
    const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
    let name = "message", data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) name = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
    }
    if (data) handle(name, JSON.parse(data));   // not a keep-alive comment
  }
  return buffer;
}
async function stream(r, sentence) {
  const resp = await fetch("/v1/translate/stream", {method: "POST", headers: headers(true),
    body: JSON.stringify({text: sentence, run: r.name, attention: r.attention,
                          page: r.attention})});
  if (!resp.ok) throw new Error(await failure(resp));
  const reader = resp.body.getReader(), decoder = new TextDecoder();
  let buffer = "", width = 0, words = [];
  const handle = (name, d) => {
    if (name === "start") { width = d.source_tokens.length; startGrid(d.source_tokens); }
    else if (name === "token") {
      words.push(d.token); answer.textContent = words.join(" ");
      growGrid(d.token, d.weights, width);
    } else if (name === "final") {
      answer.textContent = d.translation.text; showPage(d.page);
    } else if (name === "error") { throw new Error(d.error.message); }
  };
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    buffer = events(buffer + decoder.decode(value, {stream: true}), handle);
  }
}
async function ask() {
  const r = run();
  reset();
  say("working\u2026");
  if (r.inputs === "image") {
    const chosen = dropped || file.files[0];
    if (!chosen) { say("choose or drop an image first"); return; }
    const form = new FormData();
    form.append("file", chosen); form.append("run", r.name); form.append("page", "true");
    const d = await post("/v1/caption", form, false);
    answer.textContent = d.captions[0].caption; showPage(d.page);
    return;
  }
  const input = text.value.trim();
  if (!input) { say("type something first"); return; }
  if (r.streams) { await stream(r, input); return; }
  const path = r.app === "translate" ? "/v1/translate" : r.app === "sentiment"
    ? "/v1/sentiment" : "/v1/predict";
  const body = {texts: [input], run: r.name, page: r.attention};
  const d = await post(path, JSON.stringify(body), true);
  if (d.translations) answer.textContent = d.translations[0].text;
  else if (d.results) answer.textContent = d.results[0].label + (d.results[0].prob === null
    ? "" : "  P(positive) = " + d.results[0].prob.toFixed(3));
  else answer.textContent = JSON.stringify(d.predictions[0]).slice(0, 200);
  showPage(d.page);
}
document.getElementById("go").addEventListener("click", () => {
  ask().then(() => say("done"), (e) => say(String(e.message || e)));
});
text.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) document.getElementById("go").click();
});
drop.addEventListener("dragover", (ev) => { ev.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (ev) => {
  ev.preventDefault(); drop.classList.remove("over");
  dropped = ev.dataTransfer.files[0] || null;
  drop.textContent = dropped ? dropped.name : "or drop an image here";
});
file.addEventListener("change", () => {
  dropped = null; drop.textContent = "or drop an image here";
});
"""
