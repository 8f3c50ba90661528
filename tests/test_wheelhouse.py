"""The wheelhouse checks of ``nox -s build`` / ``nox -s install_check`` (scripts/build_check.py,
scripts/install_check.py), proven on real wheels built here and on hand-made archives; and what
torchfix-doctor says and returns where torch cannot be imported."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import build_check  # noqa: E402
import family  # noqa: E402
import install_check  # noqa: E402

sys.path.remove(str(ROOT / "scripts"))

FIX = family.by_name("torchfix-autotune")


def build_wheel(package: Path, out: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(out),
        str(package),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


def copy_package(package: Path, dest: Path) -> Path:
    shutil.copytree(package, dest, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.egg-info", "build"))
    return dest


def make_wheel(path: Path, files: dict[str, str], entry_points: str = "") -> Path:
    info = "demo-0.1.0.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: demo\nVersion: 0.1.0\n")
        if entry_points:
            archive.writestr(f"{info}/entry_points.txt", entry_points)
    return path


def test_fix_wheel_built_from_the_tree_passes_the_checks(tmp_path: Path) -> None:
    wheel = build_wheel(copy_package(FIX, tmp_path / FIX.name), tmp_path / "dist")
    assert build_check.check_contents(wheel, "torchfix_autotune") == []
    assert build_check.check_entry_points(wheel) == []
    groups = {group for group, _, _ in build_check.entry_points(build_check.wheel_members(wheel))}
    assert groups == {"torchfix.fixes", "torchfix.triggers"}


def test_wheel_missing_its_entry_point_module_fails_with_a_clear_message(tmp_path: Path) -> None:
    """A package whose wheel lost package.py (the module its torchfix.fixes entry point names)."""
    package = copy_package(FIX, tmp_path / FIX.name)
    (package / "src" / "torchfix_autotune" / "package.py").unlink()
    wheel = build_wheel(package, tmp_path / "dist")
    assert build_check.check_entry_points(wheel) == [
        f"{wheel.name}: entry point [torchfix.fixes] autotune = torchfix_autotune.package:FIX: module "
        "torchfix_autotune.package is not in the wheel (no torchfix_autotune/package.py or "
        "torchfix_autotune/package/__init__.py)"
    ]


def test_entry_point_attribute_missing_from_its_module_is_caught(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path / "demo-0.1.0-py3-none-any.whl",
        {"demo/__init__.py": "", "demo/package.py": "SPEC = 1\n", "demo/_act.py": "def entry():\n    pass\n"},
        "[torchfix.fixes]\ndemo = demo.package:FIX\n\n[torch.backends]\ndemo = demo._act:entry\n",
    )
    assert build_check.check_entry_points(wheel) == [
        f"{wheel.name}: entry point [torchfix.fixes] demo = demo.package:FIX: demo/package.py does not define "
        "'FIX' at top level"
    ]


@pytest.mark.parametrize(
    ("path", "product"),
    [
        ("torchfix_core/testing/_contract.py", True),  # the testing kit is product code
        ("torchfix_core/_doctor.py", True),
        ("torchfix_x/tests/helpers.py", False),
        ("torchfix_x/benchmarks/run.py", False),
        ("torchfix_x/conftest.py", False),
        ("torchfix_x/test_probe.py", False),
        ("torchfix_x/probe_test.py", False),
        ("torchfix_placement_cache/_multirank.py", False),  # on the deny list
    ],
)
def test_harness_rule(path: str, product: bool) -> None:
    assert (build_check.harness_reason(path) is None) == product


def test_wheel_with_tests_or_stray_files_is_flagged(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path / "demo-0.1.0-py3-none-any.whl",
        {"demo/__init__.py": "", "demo/tests/test_a.py": "", "demo/conftest.py": "", "demo_bench.py": ""},
    )
    problems = build_check.check_contents(wheel, "demo")
    assert len(problems) == 3, problems
    assert any("demo/tests/test_a.py is inside a 'tests' directory" in p for p in problems)
    assert any("demo/conftest.py is a pytest conftest" in p for p in problems)
    assert any("demo_bench.py is outside demo/ and demo-0.1.0.dist-info/" in p for p in problems)


def test_rebuilt_wheel_comparison_ignores_timestamps_and_catches_content(tmp_path: Path) -> None:
    files = {"demo/__init__.py": "x = 1\n"}
    a = make_wheel(tmp_path / "a.whl", files)
    b = make_wheel(tmp_path / "b.whl", files)
    assert build_check.compare_wheels(a, b) == []
    c = make_wheel(tmp_path / "c.whl", {"demo/__init__.py": "x = 2\n", "demo/extra.py": ""})
    assert build_check.compare_wheels(a, c) == [
        "a.whl: the wheel rebuilt from the sdist adds demo/extra.py",
        "a.whl: demo/__init__.py differs in the wheel rebuilt from the sdist",
    ]


def doctor_report(rows: list[dict[str, object]], source: str = "torch.backends") -> dict[str, object]:
    return {"torch": {"installed": True}, "activation": {"source": source, "detail": ""}, "fixes": rows}


def row(package: Path, state: str, version: str | None = None) -> dict[str, object]:
    return {
        "id": package.name.removeprefix("torchfix-"),
        "distribution": package.name,
        "version": version or family.package_version(package),
        "state": state,
        "reason": "r",
    }


def test_install_check_accepts_every_fix_with_a_state_and_flags_failures() -> None:
    fixes = family.fix_packages()
    states = {"torchfix-fp8-recompute": "not-installed"}  # TransformerEngine absent: right
    good = [row(p, states.get(p.name, "applied")) for p in fixes]
    assert install_check.doctor_rows_problems(doctor_report(good), family.all_packages(), "all") == []
    bad = [row(fixes[0], "failed"), row(fixes[1], "applied", "9.9.9"), *good[2:]]
    problems = install_check.doctor_rows_problems(doctor_report(bad, source="none"), family.all_packages(), "all")
    assert len(problems) == 3, problems
    assert "torchfix was not activated" in problems[0]
    assert f"{fixes[0].name.removeprefix('torchfix-')} is failed" in problems[1]
    assert "9.9.9" in problems[2]
    # one fix alone: the others are absent (no row, or not-installed) and that is right
    single = [row(family.by_name("torchfix-sac-replay"), "applied")]
    installed = [family.core(), family.by_name("torchfix-sac-replay")]
    assert install_check.doctor_rows_problems(doctor_report(single), installed, "one") == []


def test_doctor_without_torch_says_so_and_exits_3() -> None:
    """torch blocked from importing (``sys.modules['torch'] = None``: what an absent torch raises)."""
    code = "import sys; sys.modules['torch'] = None\nfrom torchfix_core._doctor import main\nraise SystemExit(main([]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 3 == install_check.EXIT_NO_TORCH, done.stderr
    assert "torch: not installed: torchfix has nothing to patch until torch is installed" in done.stdout


def test_check_fails_clearly_when_a_distribution_is_missing_from_the_wheelhouse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build_check.main(["check", str(tmp_path), "torchfix-autotune", "--no-rebuild"]) == 1
    err = capsys.readouterr().err
    version = family.package_version(FIX)
    assert f"torchfix-autotune: expected one wheel of version {version} in {tmp_path}, found none" in err
    assert f"torchfix-autotune: expected one sdist of version {version} in {tmp_path}, found none" in err
