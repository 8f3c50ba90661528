"""Every package of the family has the same shape (docs/adding-a-fix.md), checked on the source tree
and on what is installed."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import compatibility  # noqa: E402 - scripts/compatibility.py: the compatibility page
import family  # noqa: E402 - the repository's one list of packages (scripts/family.py)

sys.path.remove(str(ROOT / "scripts"))

PACKAGES = family.PACKAGES
FIXES = family.fix_packages()
ALL = family.all_packages()


def module_dir(package: Path) -> Path:
    return package / "src" / package.name.replace("-", "_")


def pyproject(package: Path) -> dict:
    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11")
    return tomllib.loads((package / "pyproject.toml").read_text())


@pytest.mark.parametrize("package", ALL, ids=lambda p: p.name)
def test_package_has_the_shared_shape(package: Path) -> None:
    mod = module_dir(package)
    for required in ("__init__.py", "version.py", "py.typed"):
        assert (mod / required).is_file(), f"{package.name}: missing src/{mod.name}/{required}"
    assert (package / "README.md").is_file()
    data = pyproject(package)
    assert data["build-system"]["build-backend"] == "hatchling.build"
    assert data["project"]["dynamic"] == ["version"]
    assert data["tool"]["hatch"]["version"]["path"] == f"src/{mod.name}/version.py"
    assert re.fullmatch(r'__version__ = "\d+\.\d+\.\d+"\n', (mod / "version.py").read_text())


@pytest.mark.parametrize("package", ALL, ids=lambda p: p.name)
def test_no_package_depends_on_torch(package: Path) -> None:
    deps = pyproject(package)["project"].get("dependencies", [])
    assert not [d for d in deps if re.match(r"^torch\b", d)], f"{package.name} must not move the user's torch"


@pytest.mark.parametrize("package", FIXES, ids=lambda p: p.name)
def test_fix_package_layout_and_entry_point(package: Path) -> None:
    mod = module_dir(package)
    fix_id = package.name.removeprefix("torchfix-")
    for required in ("package.py", "patch.py"):
        assert (mod / required).is_file(), f"{package.name}: missing {required}"
    assert (package / "tests" / "test_contract.py").is_file()
    assert (package / "demo.py").is_file()
    eps = pyproject(package)["project"]["entry-points"]["torchfix.fixes"]
    if fix_id in eps:
        assert (ROOT / "docs" / "fixes" / f"{fix_id}.md").is_file()
        assert eps[fix_id] == f"{mod.name}.package:FIX"
    else:  # a package named after its fixes' common prefix (torchfix-fsdp-recompute: fsdp-recompute-cast,
        # -unshard; torchfix-fsdp-offload: fsdp-offload-hook), so a fix id still says where it lives
        assert eps and all(name.startswith(f"{fix_id}-") for name in eps), eps
        for name in eps:
            assert (ROOT / "docs" / "fixes" / f"{name}.md").is_file(), name
    # further fixes of the same package (e.g. a framework adapter) load other specs of package.py
    assert all(re.fullmatch(rf"{mod.name}\.package:[A-Z_]+", v) for v in eps.values()), eps


@pytest.mark.parametrize("package", FIXES, ids=lambda p: p.name)
def test_entry_point_modules_import_nothing_heavy(package: Path) -> None:
    """package.py and __init__.py are loaded at `import torch`: at module level they import only
    torchfix_core.spec and their own version (imports inside functions run later, when called)."""
    mod = module_dir(package)
    for name in ("__init__.py", "package.py", "version.py"):
        tree = ast.parse((mod / name).read_text())
        for node in tree.body:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for imported in names:
                assert imported in ("__future__", "torchfix_core.spec", f"{mod.name}.version", "typing"), (
                    f"{package.name}/{name} imports {imported}"
                )


@pytest.mark.parametrize("package", FIXES, ids=lambda p: p.name)
def test_fix_package_version_is_lazy_and_matches_the_distribution(package: Path) -> None:
    """Each fix's ``__init__`` takes ``__version__`` from torchfix_core.spec.lazy_version (one shared
    implementation, nothing imported at ``import torch``) and it equals the installed version."""
    mod = module_dir(package)
    assert "__getattr__ = lazy_version(__name__)\n" in (mod / "__init__.py").read_text()
    code = f"import sys, {mod.name} as m; loaded = '{mod.name}.version' in sys.modules; print(loaded, m.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", distribution(package.name).version]


@pytest.mark.parametrize("package", FIXES, ids=lambda p: p.name)
def test_installed_fix_registers_its_entry_point(package: Path) -> None:
    dist = distribution(package.name)
    names = [ep.name for ep in dist.entry_points if ep.group == "torchfix.fixes"]
    declared = pyproject(package)["project"]["entry-points"]["torchfix.fixes"]
    name = package.name.removeprefix("torchfix-")
    assert name in names or all(n.startswith(f"{name}-") for n in names), names
    assert names and sorted(names) == sorted(declared)


def test_torchfix_all_dependencies_are_generated_and_current() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    deps = pyproject(PACKAGES / "torchfix-all")["project"]["dependencies"]
    assert [re.split(r"[<>=]", d)[0] for d in deps] == [p.name for p in family.member_packages()]


def test_every_directory_under_packages_is_a_known_member() -> None:
    """A new package directory is either a fix (``torchfix.fixes`` entry point), core or torchfix-all."""
    on_disk = sorted(p.name for p in PACKAGES.iterdir() if (p / "pyproject.toml").is_file())
    assert on_disk == sorted(p.name for p in ALL)


def test_compatibility_page_is_current_and_drift_is_caught() -> None:
    """docs/compatibility.md agrees with the fixes' metadata; a changed range or version is caught."""
    meta = compatibility.metadata()
    assert compatibility.check(meta) == []
    changed = {**meta, "fixes": [dict(f) for f in meta["fixes"]]}
    changed["fixes"][0]["targets"] = {"torch": ">=9.0"}
    changed["fixes"][1]["version"] = "9.9.9"
    problems = compatibility.check(changed)
    assert any(meta["fixes"][0]["id"] in p for p in problems), problems
    assert any(meta["fixes"][1]["id"] in p and "9.9.9" in p for p in problems), problems
    assert any(meta["fixes"][0]["id"] in p and "on torch" in p and "range >=9.0" in p for p in problems), problems

    # a fix that no recorded torch or verify cell ran (a new fix) makes every cell stale: "absent" is never shown
    added = {**meta, "fixes": [*meta["fixes"], {**meta["fixes"][0], "id": "new-fix"}]}
    absent = [p for p in compatibility.check(added) if "has no run of new-fix (absent)" in p]
    cells = {**compatibility.load_cells("torch-"), **compatibility.load_cells("verify-")}
    assert len(absent) == len(cells) > len(compatibility.load_cells("torch-")) > 0, absent

    # the TransformerEngine table is checked the same way: its matrix, and states against TE ranges
    te_fix = next(i for i, f in enumerate(meta["fixes"]) if "transformer_engine" in f["targets"])
    changed = {**meta, "te_matrix": [*meta["te_matrix"], "9.9.9"], "fixes": [dict(f) for f in meta["fixes"]]}
    changed["fixes"][te_fix]["targets"] = {"transformer_engine": ">=9.0"}
    problems = compatibility.check(changed)
    assert any(p.startswith("te matrix") for p in problems), problems
    assert any("on transformer_engine" in p and "range >=9.0" in p for p in problems), problems


def test_a_partial_cell_rerun_keeps_the_reports_it_did_not_rerun() -> None:
    """``MATRIX_ONLY`` re-runs of a cell replace only the directories they ran; states are the new run's."""
    counts = {"tests": 3, "failures": 0, "errors": 0, "skipped": 0, "passed": 3}
    old = {"commit": "aaa", "states": {"x": {"state": "applied"}}, "reports": {"p": counts, "q": counts}, "notes": ""}
    new = {"commit": "bbb", "states": {"x": {"state": "not-needed"}}, "reports": {"q": {**counts, "passed": 2}}}
    merged = compatibility.merge_partial(old, {**new, "notes": "only q"})
    assert merged["reports"] == {"p": counts, "q": {**counts, "passed": 2}}
    assert merged["commit"] == "aaa+bbb"
    assert merged["states"] == new["states"] and merged["notes"] == "only q"
    whole = compatibility.merge_partial(old, {**new, "reports": {"p": counts, "q": counts}, "notes": ""})
    assert whole["commit"] == "bbb"
    # the page written again from the same partial cell: nothing doubles
    again = compatibility.merge_partial(merged, {**new, "notes": "only q"})
    assert again["commit"] == "aaa+bbb" and again["notes"] == "only q", again


def test_a_gpu_cell_shows_what_verify_found(tmp_path: Path) -> None:
    """A verify cell (``.matrix-results/verify-gpu-<torch>/verify.json``: ``torchfix-doctor verify --all
    --json`` on a GPU machine) is read into states and verdicts, and rendered in the "Verified" table: the
    device in the column head, the probe's state first in each cell (so that ``--check`` holds it
    against the validated range like a CPU cell), the verdict in a few words, the measures of the
    runs that showed the bug."""
    meta = compatibility.metadata()
    first, second = meta["fixes"][0]["id"], meta["fixes"][1]["id"]
    red = {"outcome": {"result": "observed", "measure": "KeyError: 'x'", "detail": ""}}
    green = {"outcome": {"result": "not-observed", "measure": "gradients equal", "detail": ""}}
    rows = [
        {
            "id": first,
            "state": "applied",
            "without": red,
            "with": green,
            "seconds": 12.3,
            "verdict": "repaired: reproduced without the fix, gone with it",
        },
        {
            "id": second,
            "state": "not-needed",
            "without": None,
            "with": None,
            "seconds": 0.0,
            "verdict": "skipped: needs transformer_engine>=2.18",
        },
    ]
    folder = tmp_path / "verify-gpu-2.15.0"
    folder.mkdir()
    verify = {
        "torch": "2.15.0+cu130",
        "cuda": True,
        "device": "NVIDIA H100 80GB HBM3",
        "python": "3.12.3",
        "rows": rows,
    }
    (folder / "verify.json").write_text(json.dumps(verify))
    (folder / "commit.txt").write_text("abc1234\n")
    cell = compatibility.read_verify_cell(folder)
    assert cell["states"][first] == {"state": "applied", "reason": rows[0]["verdict"]}
    assert cell["verify"][first]["without"] == {"result": "observed", "measure": "KeyError: 'x'"}
    text = "\n".join(compatibility.render_verify({**meta, "fixes": meta["fixes"][:2]}, {"verify-gpu-2.15.0": cell}))
    assert "| fix | torch 2.15.0 (NVIDIA H100 80GB HBM3) |" in text
    assert f"| `{first}` {meta['fixes'][0]['version']} | **applied**: red without, green with (12 s) |" in text
    assert f"| `{second}` {meta['fixes'][1]['version']} | not-needed: skipped: needs transformer_engine>=2.18 |" in text
    assert f"- `{first}`, torch 2.15.0+cu130: without the fix KeyError: 'x'; with it gradients equal" in text
    assert compatibility.verdict_words("NOT REPAIRED: the bug showed with the fix applied") == "**NOT REPAIRED**"
    assert compatibility.verdict_words("skipped: cannot run here (needs a CUDA GPU)") == "cannot run: needs a CUDA GPU"
    assert compatibility.verdict_words("skipped: not-installed here (magi_compiler is not installed)") == (
        "skipped: magi_compiler is not installed"
    )


def test_a_cell_says_how_long_its_tests_took() -> None:
    """The page's "(test minutes)" row: the sum of a cell's JUnit times; ``?`` where one is unknown."""
    counts = {"tests": 3, "failures": 0, "errors": 0, "skipped": 0, "passed": 3}
    assert (
        compatibility.test_minutes({"reports": {"p": {**counts, "seconds": 90}, "q": {**counts, "seconds": 60}}}) == "2"
    )
    assert compatibility.test_minutes({"reports": {"p": {**counts, "seconds": 90}, "q": counts}}) == "?"
    assert compatibility.test_minutes({"reports": {}}) == "?"


def test_a_combination_run_says_its_wall_minutes() -> None:
    """The combination table's "minutes": the nox session's wall time and workers (``run.json``), the
    JUnit sum where a run has none (a worker's time is counted once per worker there)."""
    counts = {"tests": 3, "failures": 0, "errors": 0, "skipped": 0, "passed": 3, "seconds": 5400}
    cell = {"reports": {"combinations": counts}}
    assert compatibility.combination_minutes({**cell, "run": {"wall_seconds": 1500, "workers": 2}}) == "25 (2 workers)"
    assert compatibility.combination_minutes({**cell, "run": {"wall_seconds": 60, "workers": 1}}) == "1 (1 worker)"
    assert compatibility.combination_minutes(cell) == "90"
    assert compatibility.combination_minutes({"reports": {}}) == "?"
    names = ["combinations-2.13.0", "combinations-2.8.0", "combinations-2.10.0"]
    ordered = [n for n, _ in sorted(((n, {}) for n in names), key=compatibility.by_release)]
    assert ordered == ["combinations-2.8.0", "combinations-2.10.0", "combinations-2.13.0"]


def test_cell_names_sort_by_their_releases() -> None:
    """The page lists cells (in its "why" lines too) in release order, not as strings."""
    names = ["te-2.8.0", "torch-2.10.0-py3.11", "te-2.14.1", "magi-2.13.0", "torch-2.9.1-py3.11", "te-1.13.0"]
    assert sorted(names, key=compatibility.release_order) == [
        "magi-2.13.0",
        "te-1.13.0",
        "te-2.8.0",
        "te-2.14.1",
        "torch-2.9.1-py3.11",
        "torch-2.10.0-py3.11",
    ]


def test_workflow_matrices_match_the_noxfile() -> None:
    """The workflow's job matrices (torch, combinations per torch, Python, TransformerEngine, Magi per
    torch, patch-release twins) list what noxfile.py runs."""
    noxfile = (ROOT / "noxfile.py").read_text()
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text()

    def listed(pattern: str, text: str) -> list[str]:
        match = re.search(pattern, text, re.M)
        assert match, pattern
        return re.findall(r'"([^"]+)"', match.group(1))

    for nox_name, key in (
        ("TORCH_MATRIX", "torch"),
        ("TORCH_MATRIX", "combinations-torch"),
        ("MATRIX_PYTHONS", "python"),
        ("TE_VERSIONS", "te"),
        ("MAGI_TORCH", "magi-torch"),
    ):
        assert listed(rf"^{nox_name} = \[(.*?)\]", noxfile) == listed(rf"^\s+{key}: \[(.*?)\]", workflow), nox_name
    twins = list(compatibility.noxfile_constant("PATCH_TWINS"))
    assert twins == listed(r"^\s+twin: \[(.*?)\]", workflow), "PATCH_TWINS"


def test_the_core_names_no_fix() -> None:
    """torchfix-core knows no plugin: no fix id, and no fix's own variable, appears in any file of its
    source, code or data (what the core needs to know about a fix, the fix declares in its FixSpec;
    what it knows of fixes that are not installed comes from torchfix-all's entry points,
    ``torchfix.family`` and ``torchfix.catalog``)."""
    core_src = family.core() / "src"
    ids = set(family.family_members())
    fixture_ids = {"demo-checkpoint", "demo-dynamo", "demo-absent", "demo-broken"}
    words = set()
    for fix_id in ids | fixture_ids:
        words |= {fix_id, fix_id.replace("-", "_"), "TORCHFIX_" + fix_id.upper().replace("-", "_") + "_"}
    pattern = re.compile("|".join(rf"(?<![A-Za-z0-9]){re.escape(w)}(?![A-Za-z0-9-])" for w in sorted(words)), re.I)
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(core_src.rglob("*"))
        if path.is_file() and path.suffix not in (".pyc",)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == [], "\n".join(found)


def test_every_fix_id_has_its_page_and_the_readme_links_it() -> None:
    """Each fix id of the family has ``docs/fixes/<id>.md`` (the page doctor names for it) and the
    README's table links that page."""
    from torchfix_core._doctor import DOCS_PAGE

    readme = (ROOT / "README.md").read_text()
    missing = [fix_id for fix_id in family.family_members() if not (ROOT / DOCS_PAGE.format(id=fix_id)).is_file()]
    assert missing == [], f"fix ids without a page: {missing}"
    unlinked = [fix_id for fix_id in family.family_members() if f"]({DOCS_PAGE.format(id=fix_id)})" not in readme]
    assert unlinked == [], f"fix ids the README does not link: {unlinked}"


def test_every_declared_reproduction_ships_in_its_own_wheel() -> None:
    """A fix's ``FixSpec.reproduction`` names a function of its own distribution's module (the wheel
    carries it: ``torchfix-doctor verify`` runs it on a user's machine), importable without torch
    (the module imports torch inside its functions), and the function takes no arguments."""
    import importlib
    import inspect

    problems, declared = [], 0
    for package in FIXES:
        for fix_id, value in family.fix_entry_points(package).items():
            module, _, attr = value.partition(":")
            reproduction = getattr(importlib.import_module(module), attr).reproduction
            if reproduction is None:
                continue
            declared += 1
            target, _, name = reproduction.run.partition(":")
            if target.split(".")[0] != module_dir(package).name:
                problems.append(f"{fix_id}: {reproduction.run} is not in {module_dir(package).name}")
                continue
            code = f"import sys, {target}; print('torch' in sys.modules)"
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
            if out.returncode != 0 or out.stdout.strip() != "False":
                problems.append(f"{fix_id}: importing {target} failed or imported torch: {out.stderr[-300:]}")
            function = getattr(importlib.import_module(target), name, None)
            if function is None or inspect.signature(function).parameters:
                problems.append(f"{fix_id}: {reproduction.run} is not a function of no arguments")
    assert declared, "no fix declares a reproduction: the scan is broken"
    assert problems == [], "\n".join(problems)


WHO_IS_HIT = ("**Releases:**", "**Libraries:**", "**Conditions:**")


def test_every_fix_page_says_who_is_hit() -> None:
    """Every fix page has a ``## Who is hit`` section before ``## The fix`` (or its first section after
    the bug) with the three bullets a user reads to know whether the bug is theirs: the releases, the
    libraries measured (hit, not hit, not measured), and the conditions."""
    from torchfix_core._doctor import DOCS_PAGE

    problems = []
    for fix_id in family.family_members():
        page = (ROOT / DOCS_PAGE.format(id=fix_id)).read_text()
        head, found, rest = page.partition("\n## Who is hit\n")
        if not found:
            problems.append(f"{fix_id}: no '## Who is hit' section")
            continue
        section = rest.split("\n## ", 1)[0]
        bullets = [line for line in section.splitlines() if line.startswith("- ")]
        labels = tuple(label for label in WHO_IS_HIT if any(b.startswith(f"- {label}") for b in bullets))
        if labels != WHO_IS_HIT or len(bullets) != len(WHO_IS_HIT):
            problems.append(f"{fix_id}: 'Who is hit' needs exactly the bullets {WHO_IS_HIT}, found {bullets!r:.200}")
        if head.count("\n## ") > 2:
            problems.append(f"{fix_id}: 'Who is hit' comes after the bug's description, before the fix")
    assert problems == [], "\n".join(problems)


def test_the_power_set_figures_name_the_family_as_it_is() -> None:
    """docs/design.md states the opt-in power set's size and cost for the family's present size (both
    places it names a count: the suite's description and the end of "Cost"); a new fix makes this
    fail until those figures are redone, instead of leaving the page one fix behind."""
    fixes = len(family.family_members())
    subsets = f"{2**fixes - 1:,}"
    design = (ROOT / "docs" / "design.md").read_text()
    expected = [f"2^{fixes} - 1 = {subsets} subsets for the {fixes} fixes", f"{subsets} subsets of {fixes} fixes"]
    missing = [phrase for phrase in expected if phrase not in design]
    assert missing == [], f"docs/design.md does not state the power set of {fixes} fixes: {missing}"


def test_every_fix_logs_under_its_own_id() -> None:
    """A fix's logger is ``torchfix.<fix id>`` (README, ``TORCHFIX_LOG``): every logger a fix package
    names by a literal is one of the family's fix ids (``tally_and_log`` names it from the id; a name
    computed at run time, ``getLogger(MODULE)``, is torch's own logger that a probe quiets)."""
    ids = set(family.family_members())
    named: dict[str, str] = {}
    for package in FIXES:
        for source in sorted(module_dir(package).rglob("*.py")):
            for call in ast.walk(ast.parse(source.read_text())):
                if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "getLogger" and call.args:
                    if isinstance(call.args[0], ast.Constant):
                        named[f"{source.relative_to(ROOT)}:{call.lineno}"] = call.args[0].value
    assert named, "no logger found: the scan is broken"
    wrong = {where: name for where, name in named.items() if name.removeprefix("torchfix.") not in ids}
    assert wrong == {}, f"loggers not named torchfix.<fix id>: {wrong}"


def test_every_fix_declares_signatures_and_its_page_lists_them() -> None:
    """Signatures are part of what a fix is (docs/adding-a-fix.md): every fix id of the family
    declares at least one in its spec, every pattern compiles, the family's catalog (torchfix-all's
    ``catalog.json``, read through the ``torchfix.catalog`` entry point) is current
    (``scripts/generate.py --check`` covers it too), and the fix's page has a Signatures section."""
    import importlib

    from torchfix_core import _explain
    from torchfix_core._doctor import DOCS_PAGE

    catalog = {entry.id: entry for entry in _explain.catalog_entries()}
    assert set(catalog) == set(family.family_members()), "torchfix-all's catalog.json is stale: run scripts/generate.py"
    problems = []
    for package in FIXES:
        for fix_id, value in family.fix_entry_points(package).items():
            module, _, attr = value.partition(":")
            spec = getattr(importlib.import_module(module), attr)
            if not spec.signatures:
                problems.append(f"{fix_id}: no signatures")
            if [s.as_dict() for s in spec.signatures] != list(catalog[fix_id].signatures):
                problems.append(f"{fix_id}: catalog.json differs from the spec: run scripts/generate.py")
            page = (ROOT / DOCS_PAGE.format(id=fix_id)).read_text()
            if "\n## Signatures" not in page:
                problems.append(f"{fix_id}: {DOCS_PAGE.format(id=fix_id)} has no '## Signatures' section")
    problems += _explain.bad_patterns(list(catalog.values()))
    assert problems == [], "\n".join(problems)


def test_every_investigated_bug_with_a_signature_has_its_section() -> None:
    """The bugs explain names without a fix (torchfix_core._known_bugs) are the ones
    docs/investigated.md describes: each has a section there, an upstream link and a workaround."""
    from torchfix_core import _explain
    from torchfix_core._known_bugs import KNOWN_BUGS

    page = (ROOT / "docs" / "investigated.md").read_text()
    headings = re.findall(r"^## (.+)$", page, re.M)
    for bug in KNOWN_BUGS:
        assert any(h.startswith(bug["id"]) for h in headings), f"{bug['id']}: no section in docs/investigated.md"
        assert bug["upstream"] and bug["workaround"] and bug["signatures"], bug["id"]
    assert not set(b["id"] for b in KNOWN_BUGS) & set(family.family_members()), "a known bug has become a fix"
    entries = [e for e in _explain.known_entries(include_installed=False) if not e.is_fix]
    assert _explain.bad_patterns(entries) == []
