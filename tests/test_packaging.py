"""What `pip install .` builds: the sdist and the wheel ship the files pyproject.toml names.

Built by subprocess with the project's own build backend (hatchling, as `python -m build`
would run it, minus the isolated environment and its download), into a temp dir.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_files_pyproject_names_exist() -> None:
    text = (ROOT / "pyproject.toml").read_text("utf-8")
    project = tomllib.loads(text)["project"]
    assert (ROOT / project["readme"]).is_file()
    assert project["license"] == "MIT"
    license_text = (ROOT / "LICENSE").read_text("utf-8")
    assert license_text.startswith("MIT License")
    assert "Copyright (c) 2026 the mcpkit authors" in license_text
    for named in sorted(set(re.findall(r"\b([A-Z]+\.md)\b", text))):  # e.g. "see DESIGN.md"
        assert (ROOT / named).is_file(), f"pyproject.toml names {named}, which is missing"


def test_sdist_and_wheel_ship_license_and_design(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-t", "wheel",
         "-d", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (sdist,) = tmp_path.glob("mcpkit-*.tar.gz")
    (wheel,) = tmp_path.glob("mcpkit-*.whl")
    with tarfile.open(sdist) as tar:
        top = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {"LICENSE", "DESIGN.md", "README.md", "pyproject.toml"} <= top
    assert not any("node_modules" in name for name in top)  # test-only JS peers stay out
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = whl.read(metadata).decode()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: MIT" in meta
    assert "mcpkit/py.typed" in names
