const DATA = JSON.parse(document.getElementById("attnkit-data").textContent);
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function decodeWeights(enc) {
  const bin = atob(enc.b64), out = new Float32Array(bin.length / 2);
  for (let i = 0; i < out.length; i++) {
    out[i] = (bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8)) / 65535 * enc.scale;
  }
  return out;
}
function lutRgb(lut, t) {
  const n = lut.length / 6;
  const k = Math.max(0, Math.min(n - 1, Math.round((Number.isFinite(t) ? t : 0) * (n - 1))));
  const h = lut.substr(6 * k, 6);
  return [parseInt(h.substr(0, 2), 16), parseInt(h.substr(2, 2), 16), parseInt(h.substr(4, 2), 16)];
}
function paint(node, lut, t) {
  const c = lutRgb(lut, t);
  node.style.backgroundColor = "rgb(" + c.join(",") + ")";
  node.style.color = (0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]) < 128 ? "#fff" : "#000";
}
function unpaint(node) { node.style.backgroundColor = ""; node.style.color = ""; }
function rampCss(lut) {
  const n = lut.length / 6, stops = [];
  for (let k = 0; k < n; k += 8) stops.push("#" + lut.substr(6 * k, 6));
  stops.push("#" + lut.substr(6 * (n - 1), 6));
  return "linear-gradient(to right," + stops.join(",") + ")";
}
function colorbar(lut, left, right) {
  const bar = el("div", "colorbar");
  const lo = el("span", "lo", left), ramp = el("span", "ramp"), hi = el("span", "hi", right);
  ramp.style.background = rampCss(lut);
  bar.append(lo, ramp, hi);
  return bar;
}
function fmt(x) { return Math.abs(x) >= 0.01 || x === 0 ? x.toFixed(3) : x.toExponential(1); }
function option(sel, value, text) { const o = el("option", null, text); o.value = value;
  sel.append(o); }
// An example's methods: the given order first (best measured first: the page opens on it),
// then attention and the rest; the one picked stays picked if the example has it.
function fillMethods(sel, order, methods) {
  const keep = sel.value;
  sel.replaceChildren();
  const names = [...new Set([...order, "attention", ...Object.keys(methods)])]
    .filter((m) => m === "attention" || methods[m]);
  for (const name of names) option(sel, name, name);
  sel.value = keep && names.includes(keep) ? keep : names[0];
  document.getElementById("method-box").hidden = Object.keys(methods).length < 1;
}
