const revSel = document.getElementById("review"), viewSel = document.getElementById("view");
const methSel = document.getElementById("method");
const readout = document.getElementById("readout");
let rev = null, chips = [];

function preview(r) {
  const t = r.segments.map((s) => s[0]).join("").replace(/\s+/g, " ").trim();
  return t.length > 60 ? t.slice(0, 60) + "\u2026" : t;
}
function build() {
  rev = DATA.reviews[Number(revSel.value)];
  const keepMethod = methSel.value;
  methSel.replaceChildren();
  const methods = [...new Set(rev.views.map((v) => v.method))];
  methods.forEach((m) => option(methSel, m, m));
  if (methods.includes(keepMethod)) methSel.value = keepMethod;
  document.getElementById("method-box").hidden = methods.length < 2;
  fillViews();
  const pos = rev.prob >= 0.5, verdict = document.getElementById("verdict");
  const meter = el("span", "meter"), fill = el("span", "fill");
  fill.style.width = (100 * rev.prob).toFixed(1) + "%";
  fill.style.background = "rgb(" + lutRgb(DATA.palettes[DATA.signed], pos ? 0.85 : 0.15) + ")";
  meter.append(fill);
  verdict.replaceChildren(el("b", null, pos ? rev.labels[1] : rev.labels[0]), meter,
    el("span", null, "P(" + rev.labels[1] + ") = " + rev.prob.toFixed(3)));
  const box = document.getElementById("text"); box.replaceChildren(); chips = [];
  for (const [piece, i] of rev.segments) {
    if (i < 0) { box.append(piece === "\n" ? el("br") : document.createTextNode(piece)); continue; }
    const c = el("span", "tok", piece); c.tabIndex = 0; chips[i] = c;
    c.addEventListener("mouseenter", () => show(i)); c.addEventListener("focus", () => show(i));
    box.append(c);
  }
  const miss = rev.missing.map((i) => rev.tokens[i]);
  document.getElementById("missing").textContent = miss.length
    ? "Tokens not found in the text (not shaded above): " + miss.join(", ") : "";
  recolor();
}
function fillViews() {
  const keep = viewSel.value, was = keep ? rev.views[Number(keep)] : null;
  viewSel.replaceChildren();
  const shown = rev.views.map((v, k) => [v, k]).filter(([v]) => v.method === methSel.value);
  shown.forEach(([v, k]) => option(viewSel, k, v.name + (v.signed ? " (signed)" : " (weight)")));
  if (was && shown.some(([, k]) => String(k) === keep)) viewSel.value = keep;
  document.getElementById("view-box").hidden = shown.length < 2;
}
function recolor() {
  const v = rev.views[Number(viewSel.value)];
  const lut = DATA.palettes[v.signed ? DATA.signed : DATA.weights];
  let top = 0; for (const x of v.values) top = Math.max(top, v.signed ? Math.abs(x) : x);
  top = top > 0 ? top : 1;
  chips.forEach((c, i) => {
    if (!c) return;
    const x = v.values[i];
    paint(c, lut, v.signed ? 0.5 + 0.5 * x / top : x / top);
    c.title = rev.tokens[i] + ": " + (v.signed && x > 0 ? "+" : "") + fmt(x);
  });
  const bar = v.signed
    ? colorbar(lut, "\u2190 towards " + rev.labels[0] + " (" + fmt(-top) + ")",
               "towards " + rev.labels[1] + " (+" + fmt(top) + ") \u2192")
    : colorbar(lut, "0 (no weight)", fmt(top) + " (most weight)");
  document.getElementById("bar").replaceChildren(bar);
}
function show(i) {
  const v = rev.views[Number(viewSel.value)], x = v.values[i];
  const dir = !v.signed ? "weight" : x > 0 ? "towards " + rev.labels[1] : x < 0
    ? "towards " + rev.labels[0] : "no effect";
  readout.textContent = "\u201c" + rev.tokens[i] + "\u201d, " + v.name + ": "
    + (v.signed && x > 0 ? "+" : "") + fmt(x) + " (" + dir + ")";
}
DATA.reviews.forEach((r, k) => option(revSel, k, (k + 1) + ": " + preview(r)));
document.getElementById("review-box").hidden = DATA.reviews.length < 2;
revSel.addEventListener("change", build);
viewSel.addEventListener("change", recolor);
methSel.addEventListener("change", () => { fillViews(); recolor(); });
build();
