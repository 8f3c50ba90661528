"""Patch releases covered by their base's matrix column (noxfile.py ``PATCH_TWINS``): the file
comparison of scripts/release_twin.py on made-up trees and wheel metadata, the compatibility page's
judgement of a recorded twin check, and the recorded check itself."""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import compatibility  # noqa: E402
import release_twin  # noqa: E402

sys.path.remove(str(ROOT / "scripts"))


def make_tree(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


BASE_FILES = {
    "version.py": b"__version__ = '2.12.0'\n",
    "utils/checkpoint.py": b"def checkpoint(): ...\n",
    "lib/libtorch_cpu.so": b"\x7fELF base",
    "__pycache__/version.cpython-311.pyc": b"base bytecode",
}


def test_a_release_that_changes_only_version_py_is_a_twin(tmp_path: Path) -> None:
    base = make_tree(tmp_path / "base", BASE_FILES)
    release = make_tree(
        tmp_path / "release",
        {
            **BASE_FILES,
            "version.py": b"__version__ = '2.12.1'\n",
            "lib/libtorch_cpu.so": b"\x7fELF release",
            "__pycache__/version.cpython-311.pyc": b"other bytecode",  # skipped: it follows the sources
        },
    )
    found = release_twin.compare_trees(base, release)
    assert found == {
        "python_files": 2,
        "python_differing": ["version.py"],
        "other_differing": ["lib/libtorch_cpu.so"],
        "twin": True,
    }


@pytest.mark.parametrize(
    "change",
    [
        {"utils/checkpoint.py": b"def checkpoint(): return 1\n"},  # same length is not the same bytes
        {"utils/checkpoint.py": b"def checkpoint(): ..\n"},
        {"utils/new_module.py": b"x = 1\n"},  # a file only the release has
    ],
    ids=["edited", "shorter", "added"],
)
def test_a_release_that_changes_another_python_file_is_not_a_twin(tmp_path: Path, change: dict[str, bytes]) -> None:
    base = make_tree(tmp_path / "base", BASE_FILES)
    release = make_tree(tmp_path / "release", {**BASE_FILES, **change})
    found = release_twin.compare_trees(base, release)
    assert found["python_differing"] == sorted(change) and found["twin"] is False


def test_a_python_file_only_the_base_has_is_a_difference(tmp_path: Path) -> None:
    base = make_tree(tmp_path / "base", BASE_FILES)
    release = make_tree(tmp_path / "release", {k: v for k, v in BASE_FILES.items() if k != "utils/checkpoint.py"})
    assert release_twin.compare_trees(base, release)["python_differing"] == ["utils/checkpoint.py"]


def test_changed_requirements_are_named_by_both_lines() -> None:
    def metadata(*requires: str) -> str:
        return "Metadata-Version: 2.1\nName: torch\nVersion: 2.12.1\n" + "".join(
            f"Requires-Dist: {r}\n" for r in requires
        )

    base = release_twin.requirements(metadata('triton==3.7.0; platform_system == "Linux"', "sympy>=1.13.3", "filelock"))
    release = release_twin.requirements(
        metadata('triton==3.7.1; platform_system == "Linux"', "sympy>=1.13.3", "Jinja2")
    )
    assert release_twin.changed_requirements(base, release) == [
        ["filelock", None],
        [None, "Jinja2"],
        ['triton==3.7.0; platform_system == "Linux"', 'triton==3.7.1; platform_system == "Linux"'],
    ]


def test_a_base_folder_without_a_torch_wheel_is_refused_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "torch").mkdir()
    with pytest.raises(SystemExit, match="expected one torch-\\*.dist-info"):
        release_twin.compare(tmp_path)
    with pytest.raises(SystemExit, match="no torch/ folder"):
        release_twin.compare(tmp_path / "elsewhere")


def recorded() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    return compatibility.metadata(), compatibility.load_cells("twin-"), compatibility.load_cells("torch-")


def test_every_patch_twin_is_recorded_and_its_base_column_stands_for_it() -> None:
    """The recorded check (docs/results/matrix/twin-<release>.json) holds for every PATCH_TWINS entry:
    each base is a column of the matrix, the release is not, and the page says so."""
    meta, twins, cells = recorded()
    assert meta["patch_twins"], "PATCH_TWINS is empty: the test guards nothing"
    page = compatibility.PAGE.read_text()
    for release, base in meta["patch_twins"].items():
        assert base in meta["torch_matrix"] and release not in meta["torch_matrix"], (release, base)
        assert re.fullmatch(r"(\d+\.\d+)\.\d+", release) and release.rsplit(".", 1)[0] == base.rsplit(".", 1)[0]
        assert compatibility.twin_findings(meta, release, twins, cells) == []
        assert f"- torch {release}: the torch {base} column stands for it." in page


def test_a_twin_check_that_found_a_difference_is_caught() -> None:
    meta, twins, cells = recorded()
    release, base = next(iter(meta["patch_twins"].items()))
    assert compatibility.twin_findings(meta, release, {}, cells) == [
        f'torch {release} has no recorded twin check: run `nox -s "twin({release})"`'
    ]
    edited = copy.deepcopy(twins)
    edited[f"twin-{release}"]["twin"].update(twin=False, python_differing=["utils/checkpoint.py", "version.py"])
    assert compatibility.twin_findings(meta, release, edited, cells) == [
        f"torch {release}'s Python sources differ from {base}'s (utils/checkpoint.py): make it a TORCH_MATRIX column"
    ]
    fix = meta["fixes"][0]["id"]
    decided = copy.deepcopy(twins)
    state = decided[f"twin-{release}"]["states"][fix]["state"]
    decided[f"twin-{release}"]["states"][fix]["state"] = "not-needed" if state != "not-needed" else "applied"
    [problem] = compatibility.twin_findings(meta, release, decided, cells)
    assert problem.startswith(f"fix {fix!r}: ") and problem.endswith(f"{state} on {base}")
    missing = copy.deepcopy(twins)
    del missing[f"twin-{release}"]["states"][fix]
    assert compatibility.twin_findings(meta, release, missing, cells) == [
        f"fix {fix!r}: absent on torch {release}, {state} on {base}"
    ]
