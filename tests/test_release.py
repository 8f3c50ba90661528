"""Release tooling: the version bump (scripts/bump.py, on a temporary copy of the tree: the repository is
never changed), the release tag check (scripts/release.py) and the two release workflows."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import family  # noqa: E402 - the repository's one list of packages (scripts/family.py)
import release  # noqa: E402

sys.path.remove(str(ROOT / "scripts"))

WORKFLOWS = ROOT / ".github" / "workflows"
DATE = "2026-12-24"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what the bump touches: scripts/ and every package's metadata, version and changelog
    (and the fix packages' spec modules, which scripts/generate.py reads for the trigger index)."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "scripts", copy / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    for package in family.all_packages():
        dest = copy / "packages" / package.name
        version = family.version_file(package)
        (dest / version.relative_to(package)).parent.mkdir(parents=True)
        specs = [
            package / "src" / f"{v.partition(':')[0].replace('.', '/')}.py"
            for v in family.fix_entry_points(package).values()
        ]
        for path in (package / "pyproject.toml", package / "CHANGELOG.md", version, *specs):
            shutil.copy2(path, dest / path.relative_to(package))
    return copy


def bump(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(tree / "scripts" / "bump.py"), *args, "--date", DATE]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tree)


def snapshot(tree: Path) -> dict[str, str]:
    return {str(p.relative_to(tree)): p.read_text() for p in sorted((tree / "packages").rglob("*")) if p.is_file()}


def version(tree: Path, name: str) -> str:
    text = (tree / "packages" / name / "src" / name.replace("-", "_") / "version.py").read_text()
    return re.search(r'"(.+)"', text).group(1)  # type: ignore[union-attr]


def pins(tree: Path) -> str:
    return (tree / "packages" / "torchfix-all" / "pyproject.toml").read_text()


def generate_check(tree: Path) -> int:
    return subprocess.run([sys.executable, str(tree / "scripts" / "generate.py"), "--check"], cwd=tree).returncode


def test_every_distribution_has_a_keep_a_changelog_file_with_its_current_version() -> None:
    for package in family.all_packages():
        text = (package / "CHANGELOG.md").read_text()
        assert "## [Unreleased]" in text, package.name
        current = family.package_version(package)
        assert re.search(rf"^## \[{re.escape(current)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M), package.name


def set_unreleased(changelog: Path, body: str) -> None:
    """Make the tree copy's ``[Unreleased]`` section hold exactly ``body`` (whatever main has there)."""
    head, _, rest = changelog.read_text().partition("## [Unreleased]\n")
    changelog.write_text(head + "## [Unreleased]\n" + (f"\n{body}" if body else "") + "\n" + rest[rest.index("## [") :])


def test_patch_bump_writes_version_pins_and_dated_changelog_entries(tree: Path) -> None:
    log = tree / "packages" / "torchfix-autotune" / "CHANGELOG.md"
    set_unreleased(log, "### Fixed\n\n- a thing\n")
    done = bump(tree, "torchfix-autotune", "patch")
    assert done.returncode == 0, done.stderr
    assert version(tree, "torchfix-autotune") == "0.1.1"
    assert version(tree, "torchfix-all") == "0.1.0"  # a patch stays inside torchfix-all's pin
    assert '"torchfix-autotune>=0.1.1,<0.2",' in pins(tree)
    assert generate_check(tree) == 0
    text = log.read_text()
    assert f"## [Unreleased]\n\n## [0.1.1] - {DATE}\n\n### Fixed\n\n- a thing\n\n## [0.1.0]" in text
    all_log = (tree / "packages" / "torchfix-all" / "CHANGELOG.md").read_text()
    unreleased = all_log.split("## [Unreleased]")[1].split("## [0.1.0]")[0]
    assert "- Pins torchfix-autotune>=0.1.1,<0.2 (was torchfix-autotune>=0.1.0,<0.2)." in unreleased
    assert "torchfix-autotune-v0.1.1" in done.stdout


def test_bump_with_an_empty_unreleased_section_needs_a_message(tree: Path) -> None:
    set_unreleased(tree / "packages" / "torchfix-aot-fallback" / "CHANGELOG.md", "")
    before = snapshot(tree)
    done = bump(tree, "torchfix-aot-fallback", "patch")
    assert done.returncode == 1
    assert "nothing under [Unreleased]" in done.stderr and "--message" in done.stderr
    assert snapshot(tree) == before
    done = bump(tree, "torchfix-aot-fallback", "patch", "--message", "Recompute keeps the forward's config.")
    assert done.returncode == 0, done.stderr
    log = (tree / "packages" / "torchfix-aot-fallback" / "CHANGELOG.md").read_text()
    assert f"## [0.1.1] - {DATE}\n\n### Changed\n\n- Recompute keeps the forward's config.\n" in log


def test_minor_bump_that_would_leave_torchfix_all_pins_stale_fails_clearly_and_changes_nothing(tree: Path) -> None:
    before = snapshot(tree)
    done = bump(tree, "torchfix-autotune", "minor", "--message", "New behaviour.")
    assert done.returncode == 1
    assert "bump refused: torchfix-autotune 0.2.0 is outside the pin torchfix-all 0.1.0 has for it" in done.stderr
    assert "(torchfix-autotune>=0.1.0,<0.2)" in done.stderr and "--with-all" in done.stderr
    assert snapshot(tree) == before


def test_minor_bump_with_all_releases_torchfix_all_with_the_new_pin(tree: Path) -> None:
    done = bump(tree, "torchfix-core", "minor", "--message", "FixSpec gains an optional field.", "--with-all")
    assert done.returncode == 0, done.stderr
    assert version(tree, "torchfix-core") == "0.2.0"
    assert version(tree, "torchfix-all") == "0.2.0"
    assert '"torchfix-core>=0.2.0,<0.3",' in pins(tree)
    assert generate_check(tree) == 0
    all_log = (tree / "packages" / "torchfix-all" / "CHANGELOG.md").read_text()
    # the new section follows an emptied [Unreleased]; it holds what was unreleased and the new pin
    _, found, section = all_log.partition(f"## [Unreleased]\n\n## [0.2.0] - {DATE}\n\n")
    assert found, all_log[:800]
    assert "### Changed\n\n- Pins torchfix-core>=0.2.0,<0.3" in section.split("\n## [")[0], section[:800]
    assert "torchfix-core-v0.2.0 torchfix-all-v0.2.0" in done.stdout


def test_bump_refuses_when_the_pins_are_already_stale(tree: Path) -> None:
    version_py = tree / "packages" / "torchfix-autotune" / "src" / "torchfix_autotune" / "version.py"
    version_py.write_text('__version__ = "0.1.5"\n')  # edited by hand, pins not regenerated
    before = snapshot(tree)
    done = bump(tree, "torchfix-placement-cache", "patch", "--message", "x")
    assert done.returncode == 1
    assert "pins are already stale" in done.stderr and "scripts/generate.py" in done.stderr
    assert snapshot(tree) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("torchfix-nope", "patch"), "unknown distribution 'torchfix-nope'"),
        (("torchfix-autotune", "0.0.9"), "0.0.9 is not above the current version 0.1.0"),
        (("torchfix-autotune", "1.2"), "'1.2' is not X.Y.Z"),
    ],
)
def test_bad_bump_requests_fail_clearly(tree: Path, args: tuple[str, ...], message: str) -> None:
    done = bump(tree, *args, "--message", "x")
    assert done.returncode == 1 and message in done.stderr, done.stderr


def test_release_tag_names_a_distribution_at_its_version() -> None:
    for package in family.all_packages():
        tag = f"{package.name}-v{family.package_version(package)}"
        got = release.check_tag(tag)
        assert got == {
            "name": package.name,
            "version": family.package_version(package),
            "stem": package.name.replace("-", "_"),
            "repository": "pypi",
        }
        assert release.check_tag(tag, dry_run=True)["repository"] == "testpypi"


@pytest.mark.parametrize(
    ("tag", "message"),
    [
        ("torchfix-autotune-v9.9.9", "says torchfix-autotune 9.9.9, but its version.py says"),
        ("torchfix-unknown-v0.1.0", "names no distribution of the family"),
        ("v0.1.0", "names no distribution of the family"),
        ("torchfix-autotune-0.1.0", "names no distribution of the family"),
        ("torchfix-autotune-vlatest", "'latest' is not a PEP 440 version"),
    ],
)
def test_bad_release_tag_fails_clearly(tag: str, message: str) -> None:
    with pytest.raises(SystemExit, match="release tag refused") as refused:
        release.check_tag(tag)
    assert message in str(refused.value)


def test_release_workflow_tag_patterns_match_the_package_list() -> None:
    """One ``<distribution>-v*`` tag filter per distribution of scripts/family.py, in its order."""
    text = (WORKFLOWS / "release.yml").read_text()
    block = re.search(r"^  push:\n    tags:\n((?:      - .*\n)+)", text, re.M)
    assert block, "release.yml: on.push.tags not found"
    patterns = re.findall(r'- "([^"]+)"', block.group(1))
    assert patterns == [f"{p.name}-v*" for p in family.all_packages()]


def test_release_workflow_checks_the_tag_first_and_publishes_with_trusted_publishing_only() -> None:
    text = (WORKFLOWS / "release.yml").read_text()
    assert "scripts/release.py check-tag" in text
    for job in ("build", "tests", "publish-pypi", "publish-testpypi"):
        assert re.search(rf"^  {job}:\n(?:    .*\n)*?    needs: \[?[^\n]*check-tag", text, re.M), job
    assert text.count("id-token: write") == 2
    assert text.count("uses: pypa/gh-action-pypi-publish@release/v1") == 2
    assert "repository-url: https://test.pypi.org/legacy/" in text
    assert not re.search(r"password:|secrets\.", text), "trusted publishing: no stored token"
    assert "nox -s build install_check" in text and "nox -s release_tests" in text


def test_upstream_watch_workflow_runs_the_session_weekly() -> None:
    text = (WORKFLOWS / "upstream-watch.yml").read_text()
    assert re.search(r"schedule:\n\s+- cron: \"[^\"]+\"", text)
    assert "nox -s upstream_watch" in text
    assert "def upstream_watch(" in (ROOT / "noxfile.py").read_text()
