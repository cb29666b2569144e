const LUT = DATA.palettes[DATA.seq];
const exSel = document.getElementById("example");
const laySel = document.getElementById("layer"), headSel = document.getElementById("head");
const methSel = document.getElementById("method");
const readout = document.getElementById("readout");
let ex = null, w = null, m = null, ui = null;

function table(rows, id, caption) {
  const box = document.getElementById(id); box.replaceChildren();
  if (!rows.length) return;
  const t = el("table", "metrics");
  t.append(el("caption", null, caption));
  for (const r of rows) {
    const tr = el("tr");
    tr.append(el("th", null, r[0]), el("td", null, r[1]));
    t.append(tr);
  }
  box.append(t);
}
function current() {
  if (methSel.value !== "attention") return decodeWeights(ex.methods[methSel.value]);
  const T = ex.T, S = ex.S, H = ex.H, off = Number(laySel.value) * H * T * S;
  const out = new Float32Array(T * S);
  if (headSel.value === "avg") {
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < T * S; i++) out[i] += w[off + h * T * S + i] / H;
    }
  } else {
    const o = off + Number(headSel.value) * T * S;
    for (let i = 0; i < T * S; i++) out[i] = w[o + i];
  }
  return out;
}
function chip(text, role, i) {
  const c = el("span", "tok", text);
  c.tabIndex = 0; c.dataset.role = role; c.dataset.i = i;
  return c;
}
function hookWord(node, role, i) {
  node.addEventListener("mouseenter", () => highlight(role, i));
  node.addEventListener("focus", () => highlight(role, i));
  node.addEventListener("mouseleave", clear);
  node.addEventListener("blur", clear);
  node.addEventListener("keydown", (ev) => {
    const step = ev.key === "ArrowRight" || ev.key === "ArrowDown" ? 1
      : ev.key === "ArrowLeft" || ev.key === "ArrowUp" ? -1 : 0;
    const list = role === "tgt" ? ui.tgt : ui.src;
    if (step && list[i + step]) { ev.preventDefault(); list[i + step].focus(); }
  });
}
function build() {
  ex = DATA.examples[Number(exSel.value)];
  w = decodeWeights(ex.w);
  laySel.replaceChildren(); headSel.replaceChildren();
  for (let l = 0; l < ex.L; l++) {
    option(laySel, l, "layer " + (l + 1) + (l === ex.L - 1 ? " (last)" : ""));
  }
  laySel.value = ex.L - 1;
  option(headSel, "avg", "average of " + ex.H + " heads");
  for (let h = 0; h < ex.H; h++) option(headSel, h, "head " + (h + 1));
  fillMethods(methSel, DATA.order, ex.methods);
  showSelectors();
  ui = {src: [], tgt: [], rows: [], cols: [], cells: []};
  const sl = document.getElementById("src-line"), tl = document.getElementById("tgt-line");
  sl.replaceChildren(); tl.replaceChildren();
  ex.src.forEach((s, j) => { const c = chip(s, "src", j); ui.src.push(c); sl.append(c, " "); });
  ex.tgt.forEach((s, i) => { const c = chip(s, "tgt", i); ui.tgt.push(c); tl.append(c, " "); });
  const refs = document.getElementById("refs"); refs.replaceChildren();
  for (const r of ex.refs) {
    const p = el("p");
    p.append(el("span", "role", "Reference"), el("span", null, r));
    refs.append(p);
  }
  table(ex.scores, "scores", "this sentence");
  buildMatrix();
  ui.src.forEach((c, j) => hookWord(c, "src", j));
  ui.tgt.forEach((c, i) => hookWord(c, "tgt", i));
  ui.cols.forEach((c, j) => hookWord(c, "src", j));
  ui.rows.forEach((c, i) => hookWord(c, "tgt", i));
  recolor();
}
function buildMatrix() {
  const t = document.getElementById("matrix"); t.replaceChildren();
  const head = el("thead"), hr = el("tr"), corner = el("th", "corner", "output \\ source");
  hr.append(corner);
  ex.src.forEach((s, j) => { const th = el("th", "col", s); th.tabIndex = 0; th.scope = "col";
    ui.cols.push(th); hr.append(th); });
  head.append(hr); t.append(head);
  const body = el("tbody");
  ex.tgt.forEach((s, i) => {
    const tr = el("tr"), th = el("th", "row", s); th.tabIndex = 0; th.scope = "row";
    ui.rows.push(th); tr.append(th);
    for (let j = 0; j < ex.S; j++) { const td = el("td"); ui.cells.push(td); tr.append(td); }
    body.append(tr);
  });
  t.append(body);
  for (const [j, i] of ex.links) ui.cells[i * ex.S + j].classList.add("link");
}
function showSelectors() {
  const att = methSel.value === "attention";
  document.getElementById("layer-box").hidden = !att || ex.L < 2;
  document.getElementById("head-box").hidden = !att || ex.H < 2;
}
function recolor() {
  showSelectors();
  m = current();
  let top = 0; for (const v of m) top = Math.max(top, v);
  const scale = top > 0 ? top : 1;
  ui.cells.forEach((td, k) => {
    paint(td, LUT, m[k] / scale);
    td.title = ex.tgt[Math.floor(k / ex.S)] + " \u2190 " + ex.src[k % ex.S] + ": " + fmt(m[k]);
  });
  document.getElementById("bar").replaceChildren(
    colorbar(LUT, "0 (ignored)", fmt(top) + " (most looked at)"));
}
function clear() {
  for (const n of [...ui.src, ...ui.tgt, ...ui.rows, ...ui.cols]) {
    unpaint(n);
    n.classList.remove("active", "linked");
  }
  readout.textContent = "Hover over or Tab to a word.";
}
function highlight(role, idx) {
  clear();
  const T = ex.T, S = ex.S, partners = role === "tgt" ? ui.src : ui.tgt;
  const edge = role === "tgt" ? ui.cols : ui.rows, names = role === "tgt" ? ex.src : ex.tgt;
  const vals = [];
  for (let k = 0; k < (role === "tgt" ? S : T); k++) {
    vals.push(role === "tgt" ? m[idx * S + k] : m[k * S + idx]);
  }
  const top = Math.max(...vals) || 1;
  vals.forEach((v, k) => { paint(partners[k], LUT, v / top); paint(edge[k], LUT, v / top); });
  (role === "tgt" ? [ui.tgt[idx], ui.rows[idx]] : [ui.src[idx], ui.cols[idx]])
    .forEach((n) => n.classList.add("active"));
  const best = vals.map((v, k) => [v, k]).sort((a, b) => b[0] - a[0]).slice(0, 3);
  const word = role === "tgt" ? ex.tgt[idx] : ex.src[idx];
  const linked = ex.links.filter((l) => (role === "tgt" ? l[1] : l[0]) === idx)
    .map((l) => (role === "tgt" ? l[0] : l[1]));
  linked.forEach((k) => { partners[k].classList.add("linked"); edge[k].classList.add("linked"); });
  readout.textContent = (role === "tgt" ? "\u201c" + word + "\u201d looked most at: "
    : "\u201c" + word + "\u201d was looked at most by: ")
    + best.map(([v, k]) => names[k] + " (" + fmt(v) + ")").join(", ")
    + (ex.links.length ? "; aligned with: " + (linked.length
      ? linked.map((k) => names[k]).join(", ") : "nothing") : "");
}
DATA.examples.forEach((e, k) => option(exSel, k, (k + 1) + ": " + e.src.slice(0, 8).join(" ")
  + (e.src.length > 8 ? " \u2026" : "")));
document.getElementById("example-box").hidden = DATA.examples.length < 2;
table(DATA.metrics, "run-metrics", "whole test set");
exSel.addEventListener("change", build);
laySel.addEventListener("change", recolor);
methSel.addEventListener("change", recolor);
headSel.addEventListener("change", recolor);
build();
