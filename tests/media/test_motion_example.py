"""examples/video: make_clip.py makes a clip, motion.yaml finds the moving shapes, inline and on a process pool."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .conftest import decoded

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "video"
MAIN = "import sys; from flowplex.cli import main; sys.argv[0] = 'flowplex'; main()"


@pytest.fixture(scope="module")
def small_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("av", reason="av is not installed: pip install 'flowplex[media]'")
    out = tmp_path_factory.mktemp("motion") / "clip.mp4"
    subprocess.run([sys.executable, str(EXAMPLE / "make_clip.py"), "--out", str(out), "--seconds", "1",
                    "--size", "160x120"], check=True, capture_output=True, timeout=60)
    return out


@pytest.mark.parametrize("executor", [None, "pool"])
def test_motion_yaml_boxes_the_moving_shapes(av: Any, small_clip: Path, tmp_path: Path, executor: str | None) -> None:
    out = tmp_path / "motion.mp4"
    args = [sys.executable, "-c", MAIN, "run", str(EXAMPLE / "motion.yaml"), "--set", f"decode.path={small_clip}",
            "--set", f"encode.path={out}"]
    if executor:
        args += ["--default-executor", executor]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    counts = [int(line.split("\t")[-1]) for line in result.stdout.splitlines() if line.startswith("box_count")]
    assert len(counts) == 25  # one second at 25 fps
    assert counts[0] == 0 and min(counts[1:]) >= 1  # nothing moves before the second frame; then the shapes do
    assert max(counts) >= 3  # three shapes move (a fast one can leave two boxes: its leading and trailing edges)
    boxed, plain = decoded(out), decoded(small_clip)
    assert len(boxed) == 25
    drawn = np.abs(boxed[10][1].astype(int) - plain[10][1].astype(int)).sum(axis=2) > 120
    assert drawn.sum() > 100  # the boxes' outlines were drawn into the frames, and encoded
    assert np.abs(boxed[0][1].astype(int) - plain[0][1].astype(int)).max() < 60  # no box on the first frame
