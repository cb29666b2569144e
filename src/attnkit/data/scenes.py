"""Synthetic rubber-duck scenes with exactly one correct caption each (no download needed).

A scene (64 px by default) holds 2-5 ducks in distinct cells of a 3x3 grid, varying in colour,
size, position and facing; the caption is a pure function of the ducks' (colour, facing)
multiset, from four templates (`KINDS`: ``"a blue duck among yellow ducks"``, ``"three red
ducks and two green ducks"``, ``"four yellow ducks facing left"``, ``"a red duck facing right
among ducks facing left"``), so exact match is meaningful. ``word_boxes`` maps each caption
position naming objects to their boxes ``(x0, y0, x1, y1)``: ground truth for attention maps."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw

Box = tuple[int, int, int, int]

COLOURS: dict[str, tuple[int, int, int]] = {
    "yellow": (240, 200, 30), "blue": (40, 90, 220), "red": (210, 40, 40), "green": (40, 160, 60)}
FACINGS = ("left", "right")
KINDS = ("odd_colour", "two_groups", "same_facing", "odd_facing")
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
MIN_SIZE, MAX_SIZE = 32, 256
GRID = 3  # ducks live in distinct cells of a GRID x GRID layout: no overlap, at most 9

_BEAK = (245, 130, 20)
_EYE = (20, 20, 20)
_BACKGROUNDS = ((236, 236, 230), (222, 231, 240), (241, 233, 216), (226, 240, 226))
_COLOUR_JITTER = 12  # per-channel +- variation of a duck's colour, small next to palette gaps
_NOISE_SIGMA = 5.0  # "lightly noisy" backgrounds (half of the scenes)


@dataclass(frozen=True)
class Duck:
    """One figure: its colour name, facing ("left"/"right") and pixel box (x0, y0, x1, y1)."""

    colour: str
    facing: str
    box: Box


@dataclass
class Scene:
    """A generated scene: ``image`` uint8 ``[H, W, 3]``, its one correct ``caption`` (words),
    ``word_boxes`` (caption position -> boxes), every figure (``ducks``), its template ``kind``."""

    image: np.ndarray
    caption: list[str]
    word_boxes: dict[int, list[Box]]
    ducks: list[Duck] = field(default_factory=list)
    kind: str = ""

    @property
    def caption_text(self) -> str:
        return " ".join(self.caption)


def _noun(n: int) -> str:
    return "duck" if n == 1 else "ducks"


def caption_for(ducks: list[Duck]) -> tuple[str, list[str], dict[int, list[Box]]]:
    """The (kind, caption words, word_boxes) describing ``ducks``; ValueError when they fit none of
    the four templates."""
    groups = [(c, g) for c in COLOURS if (g := [d for d in ducks if d.colour == c])]
    # Larger group first; ties keep the fixed colour order, so the caption is unique.
    groups.sort(key=lambda kv: -len(kv[1]))
    boxes = lambda ds: [d.box for d in ds]  # noqa: E731

    if len(groups) == 2:
        (ca, ga), (cb, gb) = groups
        if len(gb) == 1 and len(ga) >= 2:
            words = ["a", cb, "duck", "among", ca, "ducks"]
            wb = {0: boxes(gb), 1: boxes(gb), 2: boxes(gb), 4: boxes(ga), 5: boxes(ga)}
            return "odd_colour", words, wb
        words = [NUMBERS[len(ga)], ca, _noun(len(ga)), "and", NUMBERS[len(gb)], cb, _noun(len(gb))]
        wb = {i: boxes(ga) for i in range(3)} | {i: boxes(gb) for i in range(4, 7)}
        return "two_groups", words, wb
    if len(groups) == 1:
        colour, group = groups[0]
        facing = Counter(d.facing for d in group)
        if len(facing) == 1 and len(group) >= 2:
            n, (d,) = len(group), facing
            words = [NUMBERS[n], colour, "ducks", "facing", d]
            return "same_facing", words, {i: boxes(group) for i in (0, 1, 2, 4)}
        if len(facing) == 2 and len(group) >= 3 and min(facing.values()) == 1:
            odd_dir = min(facing, key=facing.get)
            odd = [d for d in group if d.facing == odd_dir]
            rest = [d for d in group if d.facing != odd_dir]
            words = ["a", colour, "duck", "facing", odd_dir, "among", "ducks", "facing",
                     rest[0].facing]
            wb = {i: boxes(odd) for i in (0, 1, 2, 4)} | {6: boxes(rest), 8: boxes(rest)}
            return "odd_facing", words, wb
    raise ValueError("ducks fit no caption template: "
                     + ", ".join(f"{d.colour}/{d.facing}" for d in ducks))


def _sample_attributes(rng: np.random.Generator) -> list[tuple[str, str]]:
    """(colour, facing) per duck, drawn so that exactly one template applies."""
    names = list(COLOURS)
    kind = KINDS[rng.integers(len(KINDS))]
    a, b = (names[i] for i in rng.choice(len(names), size=2, replace=False))
    face = lambda: FACINGS[rng.integers(2)]  # noqa: E731
    if kind == "odd_colour":
        n = int(rng.integers(3, 6))
        return [(a, face()) for _ in range(n - 1)] + [(b, face())]
    if kind == "two_groups":
        na, nb = [(1, 1), (2, 2), (3, 2)][rng.integers(3)]
        return [(a, face()) for _ in range(na)] + [(b, face()) for _ in range(nb)]
    if kind == "same_facing":
        n, d = int(rng.integers(2, 6)), face()
        return [(a, d)] * n
    n, d = int(rng.integers(3, 6)), face()
    other = "left" if d == "right" else "right"
    return [(a, d)] * (n - 1) + [(a, other)]


def _draw_duck(draw: ImageDraw.ImageDraw, x: float, y: float, w: float, facing: str,
               body, beak, eye) -> None:
    """Draw a duck whose box starts at (x, y) with width ``w`` (height ~0.8 w)."""
    def px(u: float) -> float:  # unit x (duck faces right) -> pixels, mirrored for "left"
        return x + w * (u if facing == "right" else 1.0 - u)

    def py(v: float) -> float:
        return y + w * v

    def oval(u0, v0, u1, v1, fill):
        xa, xb = sorted((px(u0), px(u1)))
        draw.ellipse([xa, py(v0), xb, py(v1)], fill=fill)

    oval(0.0, 0.33, 0.80, 0.80, body)  # body
    draw.polygon([(px(0.0), py(0.40)), (px(0.16), py(0.45)), (px(0.02), py(0.26))],
                 fill=body)  # raised tail
    oval(0.46, 0.0, 0.84, 0.38, body)  # head
    draw.polygon([(px(0.82), py(0.14)), (px(1.0), py(0.21)), (px(0.82), py(0.27))], fill=beak)
    r = max(0.045 * w, 0.6)
    cx, cy = px(0.70), py(0.14)
    draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=eye)


def generate_scene(rng: np.random.Generator | int, size: int = 64) -> Scene:
    """One random scene ``size`` pixels square (32-256) from ``rng`` (a Generator advanced in place,
    or an int seed)."""
    rng = np.random.default_rng(rng)  # a Generator comes back as it is
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"size must be in [{MIN_SIZE}, {MAX_SIZE}] pixels, got {size}")

    attrs = _sample_attributes(rng)
    bg = np.array(_BACKGROUNDS[rng.integers(len(_BACKGROUNDS))], dtype=np.float64)
    canvas = np.broadcast_to(bg, (size, size, 3)).copy()
    if rng.random() < 0.5:
        canvas += rng.normal(0.0, _NOISE_SIGMA, canvas.shape)
    image = Image.fromarray(np.clip(np.rint(canvas), 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)

    cell = size / GRID
    cells = rng.choice(GRID * GRID, size=len(attrs), replace=False)
    ducks = []
    for (colour, facing), c in zip(attrs, cells, strict=True):
        # A 1 px margin keeps rounded edges out of the next cell. Below 60 px, 0.95 of a cell
        # leaves less than that (a negative placement range), so the width is capped there;
        # from 60 px up the cap never binds and scenes are unchanged.
        w = min(cell * rng.uniform(0.65, 0.95), cell - 1)
        h = 0.8 * w
        x = (c % GRID) * cell + rng.uniform(0, cell - w - 1)
        y = (c // GRID) * cell + rng.uniform(0, cell - h - 1)
        jitter = rng.integers(-_COLOUR_JITTER, _COLOUR_JITTER + 1, size=3)
        body = tuple(int(v) for v in np.clip(np.array(COLOURS[colour]) + jitter, 0, 255))
        _draw_duck(draw, x, y, w, facing, body, _BEAK, _EYE)
        # The box is the exact extent of the drawn pixels: drawn again on a mask of its own.
        mask = Image.new("L", (size, size), 0)
        _draw_duck(ImageDraw.Draw(mask), x, y, w, facing, 255, 255, 255)
        ducks.append(Duck(colour, facing, tuple(int(v) for v in mask.getbbox())))

    kind, words, word_boxes = caption_for(ducks)
    return Scene(np.asarray(image).copy(), words, word_boxes, ducks, kind)


def make_scenes(n: int, seed: int, size: int = 64) -> list[Scene]:
    """``n`` scenes; scene ``i`` depends only on ``(seed, i)``, so prefixes agree across ``n``."""
    if n < 0 or seed < 0:
        raise ValueError(f"n and seed must be >= 0, got n={n}, seed={seed}")
    return [generate_scene(np.random.default_rng([seed, i]), size=size) for i in range(n)]
