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

// The grid uses the explorer's scale (translation_page.py): one colour ramp over the whole
// matrix, 0 to its largest weight so far, with the same colour bar; so the streamed grid and
// the explorer below it draw the same answer alike. A larger weight repaints earlier rows.
let grid = [], gridTop = 0;
function startGrid(sourceTokens) {
  const head = el("thead"), tr = el("tr");
  tr.append(el("th", "corner", "output \\ source"));
  for (const s of sourceTokens) tr.append(el("th", "col", s));
  head.append(tr);
  live.replaceChildren(head, el("tbody"));
  grid = []; gridTop = 0;
  document.getElementById("live-bar").replaceChildren();
  document.getElementById("live-wrap").hidden = false;
}
function paintGrid() {
  const scale = gridTop > 0 ? gridTop : 1;
  for (const [cells, weights] of grid) {
    if (weights) cells.forEach((td, j) => paint(td, LUT, weights[j] / scale));
  }
  document.getElementById("live-bar").replaceChildren(
    colorbar(LUT, "0 (ignored)", fmt(gridTop) + " (most looked at)"));
}
function growGrid(token, weights, width) {
  const tr = el("tr"), th = el("th", "row", token), cells = [];
  tr.append(th);
  for (let j = 0; j < width; j++) {
    const td = el("td");
    if (weights) td.title = token + " \u2190 " + fmt(weights[j]);
    cells.push(td); tr.append(td);
  }
  grid.push([cells, weights]);
  if (weights) gridTop = Math.max(gridTop, ...weights);
  paintGrid();
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
  // A text streams sentence after sentence: each start opens that sentence's grid, and the
  // answer keeps the sentences already translated before the one growing.
  let buffer = "", width = 0, words = [], before = [];
  const handle = (name, d) => {
    if (name === "start") {
      if (words.length) before.push(words.join(" "));
      words = []; width = d.source_tokens.length; startGrid(d.source_tokens);
    } else if (name === "token") {
      words.push(d.token); answer.textContent = [...before, words.join(" ")].join(" ");
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
