const LUT = DATA.palettes[DATA.seq];
const imgSel = document.getElementById("image"), step = document.getElementById("step");
const show = document.getElementById("show"), canvas = document.getElementById("heat");
const methSel = document.getElementById("method");
let ex = null, maps = null, buttons = [];

function build() {
  ex = DATA.images[Number(imgSel.value)];
  fillMethods(methSel, DATA.order, ex.methods);
  pickMethod();
  document.getElementById("photo").src = ex.png;
  const side = 256;
  canvas.width = ex.aspect >= 1 ? side : Math.round(side * ex.aspect);
  canvas.height = ex.aspect >= 1 ? Math.round(side / ex.aspect) : side;
  const box = document.getElementById("words"); box.replaceChildren(); buttons = [];
  ex.words.forEach((w, i) => {
    const b = el("button", null, w); b.type = "button";
    b.addEventListener("click", () => select(i));
    b.addEventListener("keydown", (ev) => {
      const d = ev.key === "ArrowRight" ? 1 : ev.key === "ArrowLeft" ? -1 : 0;
      if (d && buttons[i + d]) { ev.preventDefault(); select(i + d); buttons[i + d].focus(); }
    });
    buttons.push(b); box.append(b);
  });
  const refs = document.getElementById("refs"); refs.replaceChildren();
  for (const r of ex.refs) refs.append(el("p", null, "Reference: " + r));
  step.max = ex.words.length - 1;
  select(0);
}
function pickMethod() {
  maps = decodeWeights(methSel.value === "attention" ? ex.maps : ex.methods[methSel.value]);
}
function sample(m, y, x) {
  // Bilinear, pixel centres aligned (align_corners=False), edges clamped.
  const h = ex.h, w = ex.w;
  const fy = Math.min(Math.max(y - 0.5, 0), h - 1), fx = Math.min(Math.max(x - 0.5, 0), w - 1);
  const y0 = Math.floor(fy), x0 = Math.floor(fx);
  const y1 = Math.min(y0 + 1, h - 1), x1 = Math.min(x0 + 1, w - 1), dy = fy - y0, dx = fx - x0;
  const v = (r, c) => m[r * w + c];
  const top = v(y0, x0) * (1 - dx) + v(y0, x1) * dx, bottom = v(y1, x0) * (1 - dx) + v(y1, x1) * dx;
  return top * (1 - dy) + bottom * dy;
}
function draw(i) {
  const ctx = canvas.getContext("2d"), W = canvas.width, H = canvas.height;
  ctx.clearRect(0, 0, W, H);
  const n = ex.h * ex.w, m = maps.subarray(i * n, (i + 1) * n);
  let top = 0; for (const v of m) top = Math.max(top, v);
  if (show.checked) {
    const img = ctx.createImageData(W, H), a = Math.round(255 * DATA.alpha);
    for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) {
      const v = sample(m, (y + 0.5) * ex.h / H, (x + 0.5) * ex.w / W);
      const c = lutRgb(LUT, top > 0 ? v / top : 0), o = 4 * (y * W + x);
      img.data[o] = c[0]; img.data[o + 1] = c[1]; img.data[o + 2] = c[2]; img.data[o + 3] = a;
    }
    ctx.putImageData(img, 0, 0);
  }
  document.getElementById("bar").replaceChildren(
    colorbar(LUT, "0 (not looked at)", fmt(top) + " (this word's peak)"));
  return top;
}
function select(i) {
  step.value = i;
  buttons.forEach((b, k) => b.setAttribute("aria-pressed", k === i ? "true" : "false"));
  const top = draw(i);
  document.getElementById("readout").textContent = "Word " + (i + 1) + " of " + ex.words.length
    + ": \u201c" + ex.words[i] + "\u201d (" + methSel.value + ", peak " + fmt(top) + ")";
}
DATA.images.forEach((e, k) => option(imgSel, k, (k + 1) + ": " + e.words.join(" ").slice(0, 60)));
document.getElementById("image-box").hidden = DATA.images.length < 2;
imgSel.addEventListener("change", build);
step.addEventListener("input", () => select(Number(step.value)));
show.addEventListener("change", () => select(Number(step.value)));
methSel.addEventListener("change", () => { pickMethod(); select(Number(step.value)); });
build();
