"""Test helpers for signatures: run ``torchfix-doctor explain`` on a red run's real error output.

A fix's signature test takes the error its red reproduction raised on the real unpatched library
(the scenario's ``error_type`` / ``error`` / ``traceback`` fields, captured by running it) and shows
that explain names the fix with the state of the environment it runs in:

* :func:`explain_json` with ``isolated=True`` runs explain where nothing is importable but copies of
  ``torchfix_core`` and of the family's catalog (the packages behind this environment's
  ``torchfix.catalog`` entry points, i.e. torchfix-all's data, with a minimal ``.dist-info`` each):
  ``python -I -S``, no site-packages, so no fix is installed and torch is absent. That is a laptop
  with ``pip install torchfix-all --no-deps``; the fix must be named from the catalog as
  ``not-installed``;
* with the fix turned off (``env=only_fix(fix_id, False)`` or ``TORCHFIX_DISABLE``) in this
  environment: ``disabled``, naming the variable.

:func:`assert_explained_both_ways` makes both checks of one red run's output.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = ["assert_explained", "assert_explained_both_ways", "explain_json", "failure_text", "report_of"]


def failure_text(result: Mapping[str, Any]) -> str:
    """The error of a scenario result as Python prints an uncaught exception: the traceback when the
    scenario kept it, else ``<qualified type>: <message>`` (``builtins.`` dropped)."""
    if result.get("traceback"):
        return str(result["traceback"])
    kind = str(result.get("error_type") or "")
    if not kind or not result.get("error"):
        raise AssertionError(f"the scenario result holds no error to explain: {dict(result)!r}"[:2000])
    kind = kind[len("builtins.") :] if kind.startswith("builtins.") else kind
    return f"Traceback (most recent call last):\n  (red run)\n{kind}: {result['error']}\n"


def explain_json(
    text: str = "",
    *,
    files: Sequence[str | Path] = (),
    env: Mapping[str, str] | None = None,
    isolated: bool = False,
    timeout: float = 300,
) -> dict[str, Any]:
    """``torchfix-doctor explain --json -`` on ``text`` in a fresh interpreter; its JSON report
    plus ``"exit"`` (its exit status). ``files``: explain these files instead (absolute paths; each
    match's ``seen`` rows name the file in ``where``), in one run. ``isolated``: see the module
    docstring."""
    import torchfix_core
    from torchfix_core.testing._scenario import clean_environ

    inputs = [str(Path(f).resolve()) for f in files] or ["-"]
    with tempfile.TemporaryDirectory(prefix="torchfix-explain-") as tmp:
        if isolated:
            shutil.copytree(Path(torchfix_core.__file__).parent, Path(tmp) / "torchfix_core")
            _copy_catalogs(Path(tmp))
            code = f"import sys; sys.path.insert(0, {tmp!r}); from torchfix_core._doctor import main; raise SystemExit(main(sys.argv[1:]))"
            command = [sys.executable, "-I", "-S", "-c", code, "explain", "--json", *inputs]
            environ = {k: v for k, v in clean_environ(env).items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        else:
            command = [sys.executable, "-m", "torchfix_core", "explain", "--json", *inputs]
            environ = clean_environ(env)
        proc = subprocess.run(
            command, input=text, env=environ, capture_output=True, text=True, timeout=timeout, cwd=tmp
        )
    try:
        report: dict[str, Any] = json.loads(proc.stdout)
    except ValueError as exc:
        raise AssertionError(
            f"explain printed no JSON (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        ) from exc
    report["exit"] = proc.returncode
    if isolated:
        assert report["torch_installed"] in (False, None), "isolated explain could import torch"
    return report


def _copy_catalogs(site: Path) -> None:
    """Copy into ``site`` the package behind each ``torchfix.catalog`` entry point of this environment
    and a ``.dist-info`` holding its distribution's METADATA and entry points, so that an isolated
    interpreter with ``site`` on its path finds the family's catalog and nothing else of it."""
    import importlib.metadata
    import importlib.util

    from torchfix_core._discovery import CATALOG_GROUP

    found = importlib.metadata.entry_points(group=CATALOG_GROUP)
    if not found:
        raise AssertionError(
            "no family catalog is installed (entry-point group torchfix.catalog): install torchfix-all, "
            "whose catalog names the fixes that are not installed"
        )
    for ep in found:
        top = ep.value.partition(":")[0].split(".")[0]
        spec = importlib.util.find_spec(top)
        if spec is None or not spec.submodule_search_locations:
            raise AssertionError(f"catalog entry point {ep.value!r}: package {top!r} cannot be found")
        shutil.copytree(next(iter(spec.submodule_search_locations)), site / top, dirs_exist_ok=True)
        dist = ep.dist
        if dist is None:
            raise AssertionError(f"catalog entry point {ep.value!r} belongs to no distribution")
        info = site / f"{dist.name.replace('-', '_')}-{dist.version}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(dist.read_text("METADATA") or f"Name: {dist.name}\nVersion: {dist.version}\n")
        (info / "entry_points.txt").write_text(dist.read_text("entry_points.txt") or "")


def assert_explained_both_ways(text: str, fix_id: str, *, off: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The two checks of a red run's output: explain names ``fix_id`` as ``not-installed`` where only
    the core and the family's catalog are importable (``isolated=True``), and as ``disabled`` in this
    environment with the fix turned off (``off``: the environment that turns it off; default
    ``only_fix(fix_id, False)``). Returns the ``disabled`` match."""
    from torchfix_core.testing._scenario import only_fix

    assert_explained(text, fix_id, "not-installed", isolated=True)
    return assert_explained(text, fix_id, "disabled", env=off if off is not None else only_fix(fix_id, False))


def assert_explained(text: str, fix_id: str, state: str, **options: Any) -> dict[str, Any]:
    """Run :func:`explain_json` (same options) and assert it names ``fix_id`` in ``state`` (and
    exits 0); returns the match. A ``disabled`` match must name the variable that disabled it."""
    report = explain_json(text, **options)
    named = {m["id"]: m for m in report["matches"]}
    assert fix_id in named, f"explain did not name {fix_id!r} (named {sorted(named)}) for:\n{text[-1500:]}"
    match = named[fix_id]
    assert match["state"] == state, f"{fix_id}: state {match['state']!r}, expected {state!r}: {match['advice']}"
    assert report["exit"] == 0, report
    if state == "disabled":
        assert "TORCHFIX_" in match["advice"], match["advice"]
    if state == "not-installed":
        assert f"pip install {match['distribution']}" in match["advice"], match["advice"]
    return match


def assert_silent_signatures(fix_id: str, *phrases: str, count: int | None = None) -> None:
    """A fix whose symptom is silent (a wrong value, no error): every signature it declares is a
    symptom without an error pattern (so explain cannot claim it from a log, and the report's
    ``acted`` count is the proof the fix acted), there are ``count`` of them (any number, at least
    one, if ``None``), and each of ``phrases`` is in some symptom."""
    from torchfix_core.testing._introspect import fix_spec

    signatures = fix_spec(fix_id).signatures
    assert signatures and all(s.silent for s in signatures), signatures
    assert count is None or len(signatures) == count, signatures
    symptoms = " ".join(s.symptom for s in signatures)
    missing = [phrase for phrase in phrases if phrase not in symptoms]
    assert not missing, f"{fix_id}: no symptom names {missing}: {symptoms!r}"


def applied_report(result: Mapping[str, Any], bug_present: bool) -> dict[str, Any] | None:
    """A green run's report row (a scenario result with ``ok`` and ``report``, see :func:`report_of`):
    the run passed; where the bug is absent the fix was not applied and counted nothing (``None`` is
    returned: nothing more to check); where it is present, the fix was applied and its row is
    returned for the caller's event checks."""
    report: dict[str, Any] = result["report"]
    assert result["ok"], result.get("traceback") or result.get("error")
    if not bug_present:
        assert report["state"] != "applied" and report["acted"] == 0, report
        return None
    assert report["state"] == "applied", report
    return report


def report_of(fix_id: str) -> dict[str, Any]:
    """In a scenario script: ``fix_id``'s row of ``torchfix_core.report()`` (``acted``, ``events``,
    ``state``), JSON-ready; ``{"acted": 0, "state": "absent"}`` if the fix is not installed."""
    import torchfix_core

    for row in torchfix_core.report()["fixes"]:
        if row["id"] == fix_id:
            return {"state": row["state"], "acted": row["acted"], "events": row["events"]}
    return {"state": "absent", "acted": 0, "events": {}}
