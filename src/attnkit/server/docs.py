"""``GET /docs``: the interactive API docs, served by the package (no CDN, works offline).

FastAPI's own docs page loads Swagger UI from a CDN; this one is a small page built from the
same OpenAPI schema (``GET /openapi.json``, generated from the routes and their pydantic
models): each route with its description, its request fields (type, default, limits) and a
form to try it: an editable example body, a file field for an upload, the answer as it
arrives (a stream's events one by one). Same shell and policy as the explorer pages; it talks
to this server alone.

Example:
    ```bash
    xdg-open http://127.0.0.1:8000/docs
    ```
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from attnkit.server.page_script import HEADERS_JS
from attnkit.server.state import state_of
from attnkit.viz.explorer import explorer_page

router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
async def docs(request: Request) -> HTMLResponse:
    """The API docs page."""
    data = {"spec": request.app.openapi(), "keys": bool(state_of(request).options.api_keys)}
    legend = ("Every route of this server, from its OpenAPI schema (GET /openapi.json): what "
              "it takes and what it answers.",
              "Edit an example and Send it to try a route on this server; errors are JSON "
              "{\"error\": {\"code\", \"message\"}}.")
    page = explorer_page("attnkit API", legend, None, body=_BODY, data=data,
                         script=HEADERS_JS + _JS,
                         css=_CSS, csp={"connect-src": ["'self'"]})
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})


_BODY = """
<p class="controls"><span id="key-box" hidden><label for="key">API key</label>
  <input id="key" type="password" size="24" autocomplete="off"></span>
  <a href="/openapi.json">openapi.json</a> <a href="/">live page</a></p>
<div id="routes"></div>
"""

_CSS = """
section.route { border: 1px solid var(--line); border-radius: 6px; padding: .3em 1em .8em;
                margin: 0 0 1em; }
.route h2 { font-size: 1.1em; margin: .4em 0; font-family: ui-monospace, monospace; }
.method { color: #fff; background: var(--accent); border-radius: 3px; padding: 0 .4em;
          margin-right: .5em; }
table.fields { border-collapse: collapse; font-size: .92em; margin: .4em 0; }
table.fields th, table.fields td { border: 1px solid var(--line); padding: .15em .5em;
                                   text-align: left; vertical-align: top; }
textarea { width: 100%; font-family: ui-monospace, monospace; font-size: .9em; }
pre.out { background: #f6f6f8; border: 1px solid var(--line); padding: .5em; max-height: 20em;
          overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere; }
"""

_JS = r"""
const SPEC = DATA.spec;
document.getElementById("key-box").hidden = !DATA.keys;
function resolve(schema) {
  while (schema && schema.$ref) schema = SPEC.components.schemas[schema.$ref.split("/").pop()];
  return schema || {};
}
function typeOf(s) {
  s = resolve(s);
  if (s.anyOf) return s.anyOf.map(typeOf).join(" | ");
  if (s.type === "array") return typeOf(s.items) + "[]";
  return s.type || s.format || (s.title || "object");
}
function limits(s) {
  const out = [];
  for (const k of ["minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"]) {
    if (s[k] !== undefined) out.push(k + " " + s[k]);
  }
  return out.join(", ");
}
function fieldTable(schema) {
  schema = resolve(schema);
  const t = el("table", "fields"), head = el("tr");
  for (const h of ["field", "type", "default", "limits", "meaning"]) head.append(el("th", null, h));
  t.append(head);
  const required = new Set(schema.required || []);
  for (const [name, s] of Object.entries(schema.properties || {})) {
    const tr = el("tr");
    tr.append(el("td", null, name + (required.has(name) ? " *" : "")), el("td", null, typeOf(s)),
      el("td", null, s.default === undefined ? "" : JSON.stringify(s.default)),
      el("td", null, limits(s)), el("td", null, s.description || ""));
    t.append(tr);
  }
  return t;
}
function example(schema) {
  schema = resolve(schema);
  if (schema.examples && schema.examples.length) return schema.examples[0];
  const out = {};
  for (const name of schema.required || []) {
    const s = resolve(schema.properties[name]);
    out[name] = s.type === "array" ? ["I am cold."] : s.type === "string" ? "" : null;
  }
  return out;
}
async function send(path, method, body, json, out) {
  out.textContent = "\u2026";
  const resp = await fetch(path, {method: method, headers: headers(json), body: body});
  out.textContent = resp.status + " " + resp.statusText + "\n";
  const reader = resp.body.getReader(), decoder = new TextDecoder();
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    out.textContent += decoder.decode(value, {stream: true});
  }
}
function route(path, method, op) {
  const box = el("section", "route"), h = el("h2");
  h.append(el("span", "method", method.toUpperCase()), el("span", null, path));
  box.append(h, el("p", null, op.summary || ""));
  if (op.description) box.append(el("p", "muted", op.description));
  const content = (op.requestBody || {}).content || {};
  const out = el("pre", "out"), go = el("button", null, "Send");
  go.type = "button";
  let body = () => undefined, json = false;
  if (content["application/json"]) {
    const schema = content["application/json"].schema;
    box.append(fieldTable(schema));
    const area = el("textarea");
    area.rows = 4; area.value = JSON.stringify(example(schema), null, 1);
    area.setAttribute("aria-label", "request body for " + path);
    box.append(area);
    body = () => area.value; json = true;
  } else if (content["multipart/form-data"]) {
    const schema = content["multipart/form-data"].schema;
    box.append(fieldTable(schema));
    const input = el("input"); input.type = "file";
    input.setAttribute("aria-label", "file for " + path);
    box.append(input);
    body = () => { const f = new FormData(); if (input.files[0]) f.append("file", input.files[0]);
      return f; };
  }
  go.addEventListener("click", () => {
    send(path, method.toUpperCase(), body(), json, out).catch((e) => {
      out.textContent = String(e.message || e); });
  });
  const line = el("p");
  line.append(go);
  box.append(line, out);
  return box;
}
const routes = document.getElementById("routes");
for (const [path, ops] of Object.entries(SPEC.paths)) {
  for (const [method, op] of Object.entries(ops)) routes.append(route(path, method, op));
}
"""
