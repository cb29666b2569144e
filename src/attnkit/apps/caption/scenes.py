"""``attnkit caption scene``: example images to caption, drawn like the synthetic training
scenes (`attnkit.data.scenes.generate_scene`) with the caption each should get, at the side
a model reads (a run's, or the default model's).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from attnkit.apps.caption.settings import CaptionSettings
from attnkit.apps.outputs import FIGURE, numbered_paths, output_file, write_output
from attnkit.apps.presentation import Command
from attnkit.errors import UsageError
from attnkit.settings import Option

# Scenes drawn from this seed on are not among any run's training scenes: those are drawn
# from seeds 3 * seed, 3 * seed + 1 and 3 * seed + 2 of small run seeds, in another stream.
SCENE_SEED_OFFSET = 1_000_003


def write_scenes(path: str | os.PathLike, *, count: int = 1, seed: int = 0,
                 size: int = CaptionSettings.image_size) -> list[tuple[Path, str]]:
    """Draw ``count`` scenes (``seed`` picks them) of side ``size`` (32 to 256; default: the
    default model's) into ``path``, a ``.png`` (several: ``FILE-1.png``...); returns
    ``[(file, the true caption), ...]``. UsageError: a bad count, size or file.
    """
    import numpy as np
    from PIL import Image

    from attnkit.data.scenes import MAX_SIZE, MIN_SIZE, generate_scene

    if not 1 <= count <= 1000:
        raise UsageError(f"--count must be from 1 to 1000, got {count}")
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise UsageError(f"--size must be from {MIN_SIZE} to {MAX_SIZE} pixels, got {size}")
    paths = [output_file(p, FIGURE) for p in numbered_paths(path, count)]
    if any(p.suffix.lower() != ".png" for p in paths):
        raise UsageError(f"{path}: scenes are written as .png files")
    rng = np.random.default_rng(SCENE_SEED_OFFSET + seed)
    written = []
    for p in paths:
        scene = generate_scene(rng, size)
        buffer = io.BytesIO()
        Image.fromarray(scene.image).save(buffer, format="PNG")
        written.append((write_output(p, FIGURE, buffer.getvalue()), scene.caption_text))
    return written


def _scene(values: dict[str, Any]) -> int:
    from attnkit.apps.caption.prepare import APP, read_model_config
    from attnkit.apps.run_files import read_config
    from attnkit.data.scenes import MAX_SIZE

    size = values["size"]
    if size is None and values.get("run"):
        read_config(values["run"], APP)   # a run of another app: one line naming it
        size = read_model_config(Path(values["run"])).image_size
        if size > MAX_SIZE:
            raise UsageError(f"{values['run']} reads {size}-pixel images; scenes are drawn up "
                             f"to {MAX_SIZE}: give --size (the model resizes them)")
    for path, caption in write_scenes(values["out"], count=values["count"],
                                      seed=values["seed"],
                                      size=CaptionSettings.image_size if size is None else size):
        print(f"{path}\t{caption}")
    return 0


SCENE_COMMAND = Command(
    "scene", "draw example duck scenes (PNG) to caption, each printed with its true caption",
    (Option("--out", str, "the .png file to write (default scene.png; several: FILE-1.png, "
            "FILE-2.png, ...)",
            metavar="FILE.png", default="scene.png"),
     Option("--count", int, "how many scenes (default 1)", default=1, metavar="N"),
     Option("--seed", int, "which scenes (default 0)", default=0, metavar="N"),
     Option("--run", str, "draw at the side this caption run reads (so predict need not "
            "resize them)", metavar="RUN"),
     Option("--size", int, "side in pixels, 32 to 256 (default: --run's, else "
            f"{CaptionSettings.image_size}, the default model's)", metavar="S")),
    _scene)
