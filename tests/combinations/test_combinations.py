"""Subsets of the family's fixes, each installed as real distributions (``nox -s "combinations(<torch>)"``).

Which subsets: ``selection.py`` (its docstring says why): every fix alone, all of them, every pair,
and every subset of each group of fixes that share a distribution, a trigger module, an ``after``
edge or a patch point; groups are found from the fixes' specs and, for patch points, from a probe on
this torch (``_patch_points.py``: each fix applied alone, its live patches read, reverted). With
``COMBINATIONS_SELECTION=powerset`` (``nox -s "combinations_powerset(<torch>)"``): all 2^n - 1.
The selection, its groups, the patch points, the channels and the times are written to
``$COMBINATIONS_REPORT`` when set.

The environment holds torch, torchfix-core and TransformerEngine's Python sources with the test
stand-ins (as the ``te`` sessions do), and *no* fix package. The fix distributions are built into
wheels once, at collection (this checkout's ``packages/``); each set of distributions a subset needs
is installed with pip into its own ``--target`` directory, which the subprocesses below get on
``PYTHONPATH``, so discovery finds exactly those distributions through their entry points. A subset
is of fix ids: the fixes of an installed distribution that are not in the subset are switched off
with ``TORCHFIX_<ID>_ENABLED=0``, and the subset's other fixes are switched **on** (the per-fix
switch wins over ``TORCHFIX_DISABLE=all``, which a package's reproduction sets to leave its own fix
alone), by a ``sitecustomize.py`` in a directory of the subset's own that is also on
``PYTHONPATH``, so that it reaches every interpreter of the run, also those that a package's test
harness starts with its own clean ``TORCHFIX_*`` environment. Where a reproduction starts torch with
``TORCHFIX_AUTOLOAD=0`` and applies its own fix by API, that ``sitecustomize.py`` applies the
subset's other fixes by API as soon as torch is imported. The fix under test is named by
``COMBINATIONS_UNDER_TEST`` (its own switch is left to the reproduction: off in the red run, on
in the green one).

What runs (docs/design.md, "Combination suite", says why this proves what the pairs would):

* per subset, **discovery** (``_discover.py``, no torch): exactly the installed distributions'
  fixes, none ``failed``, in the order the full set gives them, the switched-off ones
  ``disabled`` by their variable;
* once, the **co-existence** of every selected subset and every pair (``_coexistence.py``, one
  interpreter): applied together, each fix reaches its state alone, holds its patches, shares no
  attribute; a checkpointed smoke step gives the gradients of the unpatched one; revert is exact;
* the **reproductions**: each fix's declared reproduction (``FixSpec.reproduction``, read from the
  specs into ``REPRODUCTIONS``; the one ``torchfix-doctor verify``, the package's tests and its demo
  run), without and with the fix (``python -m torchfix_core.reproduction ID``), with the rest of the
  subset active: every fix's alone, each interpreter recording what it reached (``REACH_RECORDER``:
  modules imported, Python functions run or traced by Dynamo); in the full set every fix's; in a
  pair, a fix's own when the other can affect it (``selection.channels``: shared distribution,
  nested trigger, ``after`` edge, shared patch point, or, where the other is applied in the run
  alone, one of its patches met there or its apply importing library modules the run did not) and
  it is applied on this torch. Where a fix is applied alone, the bug must show without it and not
  with it; where it is not, neither run may break. A reproduction that cannot run here (it needs a
  GPU, or a library this environment lacks: Magi) says so in both runs and its row says why
  (discovery and co-existence still cover the fix). Every fix of the family declares a reproduction,
  and each shows its bug with its own fix alone switched, as verify runs it;
* the **guards** of that argument: no fix changes a callable of torch / TransformerEngine / Magi
  that is not one of its live patches (``_patch_points.py``'s ``hidden``); the recorder sees every
  interpreter, thread and exit of a scenario, and the code Dynamo traces on this torch
  (``test_the_reach_recorder_sees_*``).

Marked ``slow`` (``nox -s tests`` deselects it); it skips where fix packages are installed in the
environment itself (a development venv), because discovery would see them in every subset.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import selection  # noqa: E402 - this directory's selection.py

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "packages"
HERE = Path(__file__).resolve().parent

# fix id -> its declared reproduction (``FixSpec.reproduction``, read from the source tree's specs):
# the one ``torchfix-doctor verify``, the package's tests and its demo run. A fix that declares none
# is in the suite for discovery and co-existence only (test_every_fix_declares_its_reproduction says
# which may)
SPECS = selection.load_specs()
REPRODUCTIONS: dict[str, Any] = {
    fix: spec.reproduction for fix, (_, spec) in SPECS.items() if spec.reproduction is not None
}
MODE = os.environ.get("COMBINATIONS_SELECTION", "selection")
FAMILY = selection.load_facts()
INSTALLED_HERE = sorted({f.distribution for f in FAMILY if importlib.util.find_spec(f.distribution.replace("-", "_"))})
skip_installed_here = pytest.mark.skipif(
    bool(INSTALLED_HERE),
    reason=f"fix packages installed in this environment ({INSTALLED_HERE}): run `nox -s combinations-<torch>`",
)


def child_env(*paths: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "TORCH_DEVICE_BACKEND"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*map(str, paths), env.get("PYTHONPATH")]))
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    # Inductor trusts the CPU's ISA flags instead of compiling and loading a probe library for each
    # ISA in every compiling process (six more interpreters each); where the probe passes, as here,
    # it picks the same ISA. A compiled reproduction takes about half the time (docs/design.md).
    env.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
    env.update(extra)
    return env


def run(cmd: list[str], env: dict[str, str], timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


# ---------------------------------------------------------------- built once, at collection


@functools.cache
def workdir() -> Path:
    """Where wheels, installs and the probes' results live: ``$COMBINATIONS_WORKDIR`` when set (kept,
    and shared by the processes of one run, e.g. ``pytest -n``: each result is made once, under a
    lock, and read by the others), else a temporary directory removed at exit. Always absolute: the
    reproductions' Inductor caches live below it, and Inductor runs its C++ builds in a directory of
    their own, where a relative source path names nothing."""
    shared = os.environ.get("COMBINATIONS_WORKDIR")
    if shared:
        path = Path(shared).resolve()
        path.mkdir(parents=True, exist_ok=True)
        return path
    path = Path(tempfile.mkdtemp(prefix="torchfix-combinations-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def dirname(names: tuple[str, ...]) -> str:
    """A directory name for a set of names: joined by ``+`` while short, else a digest of them."""
    joined = "+".join(names)
    return joined if len(joined) <= 100 else f"{len(names)}-{hashlib.sha256(joined.encode()).hexdigest()[:16]}"


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """An exclusive lock of ``workdir()/name.lock`` (between the processes sharing the workdir)."""
    import fcntl

    with open(workdir() / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def made_once(name: str, make: Callable[[], Any]) -> Any:
    """``make()``'s JSON result, computed by the first process that asks and stored as
    ``workdir()/name.json`` for the others."""
    path = workdir() / f"{name}.json"
    with locked(name):
        if not path.is_file():
            path.write_text(json.dumps(make(), default=sorted))
        return json.loads(path.read_text())


@functools.cache
def wheels() -> dict[str, Path]:
    """Distribution -> its wheel: built from this checkout, or taken from ``$COMBINATIONS_WHEELS``
    (a directory holding a wheel of every fix distribution, built elsewhere from this checkout)."""
    dists = sorted({f.distribution for f in FAMILY})
    given = os.environ.get("COMBINATIONS_WHEELS")
    out = Path(given) if given else workdir() / "wheels"
    with locked("wheels"):
        if not given and not any(out.glob("*.whl")):
            done = run(
                [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out)]
                + [str(PACKAGES / d) for d in dists],
                os.environ.copy(),
            )
            assert done.returncode == 0, done.stderr
    built = {}
    for dist in dists:
        (built[dist],) = [p for p in out.glob("*.whl") if p.name.startswith(dist.replace("-", "_") + "-")]
    return built


def install(dists: tuple[str, ...]) -> Path:
    """A ``--target`` directory holding exactly ``dists`` (made once per set of distributions)."""
    target = workdir() / "installs" / dirname(dists)
    with locked("install-" + dirname(dists)):
        if not (target / ".complete").exists():
            shutil.rmtree(target, ignore_errors=True)
            cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target)]
            done = run([*cmd, *(str(wheels()[d]) for d in dists)], os.environ.copy())
            assert done.returncode == 0, done.stderr
            (target / ".complete").write_text("")
    return target


def switches(subset: selection.Subset, off: tuple[str, ...]) -> Path:
    """A directory whose ``sitecustomize.py`` switches ``off`` off and the subset's other fixes on
    in every interpreter that has it on ``PYTHONPATH`` (see the module docstring), and records the
    modules each interpreter imported where ``COMBINATIONS_MODULES`` names a directory."""
    path = workdir() / "switches" / dirname(subset)
    path.mkdir(parents=True, exist_ok=True)
    switched = "".join(f"os.environ[{selection.enabled_variable(i)!r}] = '0'\n" for i in off)
    variables = {i: selection.enabled_variable(i) for i in subset}
    recorder = REACH_RECORDER.strip().replace("\n", "\n    ")
    (path / "sitecustomize.py").write_text(
        SITECUSTOMIZE.format(
            switched=switched, members=repr(list(subset)), variables=repr(variables), recorder=recorder
        )
    )
    return path


# what switches() writes: the switches, the subset's other fixes on (by API too where the
# reproduction turned activation off), the reach recorder (REACH_RECORDER), then the sitecustomize
# this one shadows, if any (as torchfix-run's own does)
SITECUSTOMIZE = """import importlib.util
import os
import sys

{switched}
_members = {members}
_variables = {variables}
_under_test = os.environ.get("COMBINATIONS_UNDER_TEST", "")
_others = [m for m in _members if m != _under_test]
for _m in _others:
    os.environ[_variables[_m]] = "1"
if _others and os.environ.get("TORCHFIX_AUTOLOAD", "").strip() == "0":
    from torchfix_core import when_imported

    def _apply_others(_module):
        import torchfix_core

        torchfix_core.apply(only=_others)

    when_imported("torch", _apply_others)
if os.environ.get("COMBINATIONS_REACH"):
    {recorder}
_here = os.path.dirname(os.path.abspath(__file__))
for _entry in sys.path:
    _dir = os.path.abspath(_entry or os.getcwd())
    _candidate = os.path.join(_dir, "sitecustomize.py")
    if _dir != _here and os.path.isfile(_candidate):
        _spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", _candidate)
        if _spec is not None and _spec.loader is not None:
            _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
        break
"""


# Where $COMBINATIONS_REACH names a directory, every interpreter records what it reached into
# <pid>.json there: the modules it imported, the code (file:line:name) of every Python function
# that ran or that Dynamo traced, and the names that code uses (co_names, and the parts of string
# constants of dotted names, as getattr and Dynamo's rule tables name things). A global trace function (sys.settrace; threading.settrace for
# every thread started through `threading`) sees each frame's first event and returns None, so
# nothing is traced line by line; a frame of an __init__ in Dynamo's symbolic_convert.py (the
# translators, built once per traced frame and per inlined call, with the code object among their
# arguments) adds the code objects among its arguments. Written at exit, also at os._exit.
# "opaque" says why the codes cannot be trusted: a device other than the CPU took part, so the
# autograd engine ran Python on its own threads, which no trace function of this interpreter sees.
REACH_RECORDER = """
import atexit
import json
import threading
import types

_codes = set()
_translators = os.sep + os.path.join("torch", "_dynamo", "symbolic_convert.py")


def _dotted(text):
    return 0 < len(text) < 200 and all(part.isidentifier() for part in text.split("."))


def _trace(frame, event, arg):
    code = frame.f_code
    _codes.add(code)
    if code.co_name == "__init__" and code.co_filename.endswith(_translators):
        for value in frame.f_locals.values():
            if isinstance(value, types.CodeType):
                _codes.add(value)
    return None


def _opaque():
    torch = sys.modules.get("torch")
    if torch is None:
        return ""
    reasons = []
    try:
        if torch._C._get_privateuse1_backend_name() != "privateuseone":
            reasons.append("a PrivateUse1 device was registered")
        if torch.cuda.is_initialized():
            reasons.append("CUDA was initialized")
    except Exception as error:
        reasons.append(f"cannot tell which devices took part ({error!r})")
    return "; ".join(reasons)


_written = []


def _record_reach():
    if _written:
        return
    _written.append(True)
    sys.settrace(None)
    ran = list(_codes)
    codes = sorted({f"{c.co_filename}:{c.co_firstlineno}:{c.co_name}" for c in ran})
    names = set()
    for code in ran:
        names.update(code.co_names)
        for const in code.co_consts:
            if isinstance(const, str) and _dotted(const):
                names.update(const.split("."))
    record = {"modules": sorted(sys.modules), "codes": codes, "names": sorted(names), "opaque": _opaque()}
    with open(os.path.join(os.environ["COMBINATIONS_REACH"], f"{os.getpid()}.json"), "w") as handle:
        json.dump(record, handle)


_real_exit = os._exit


def _exit_recorded(status):
    _record_reach()
    _real_exit(status)


os._exit = _exit_recorded
atexit.register(_record_reach)
threading.settrace(_trace)
sys.settrace(_trace)
"""


def everything() -> tuple[str, ...]:
    return tuple(sorted(wheels()))


@functools.cache
def patch_points() -> dict[str, dict[str, Any]]:
    """``_patch_points.py`` run with every distribution installed, on this torch."""

    def probe() -> Any:
        env = child_env(install(everything()), TORCHFIX_AUTOLOAD="0")
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(HERE)])
        done = run([sys.executable, str(HERE / "_patch_points.py")], env)
        assert done.returncode == 0, f"patch-point probe:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return json.loads(done.stdout.strip().splitlines()[-1])

    return made_once("patch-points", probe)  # type: ignore[no-any-return]


@functools.cache
def apply_imports() -> dict[str, dict[str, list[str]]]:
    """Fix id -> what its apply loads (``library``: modules of torch, TE, Magi beyond its triggers;
    ``own``: its distribution's modules): ``_patch_points.py --apply-imports``, a fresh interpreter
    per fix, ``jobs()`` at once."""

    def one(fix: str) -> dict[str, list[str]]:
        env = child_env(install(everything()), TORCHFIX_AUTOLOAD="0")
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(HERE)])
        done = run([sys.executable, str(HERE / "_patch_points.py"), "--apply-imports", fix], env)
        assert done.returncode == 0, f"apply-imports probe of {fix}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    def make() -> dict[str, dict[str, list[str]]]:
        from concurrent.futures import ThreadPoolExecutor

        fixes = sorted(patch_points())
        with ThreadPoolExecutor(jobs()) as pool:
            return dict(zip(fixes, pool.map(one, fixes)))

    return made_once("apply-imports", make)  # type: ignore[no-any-return]


def jobs() -> int:
    """How many reproductions or probes run at once: ``$COMBINATIONS_JOBS`` (default 1)."""
    return max(1, int(os.environ.get("COMBINATIONS_JOBS", "1")))


@functools.cache
def plan() -> tuple[list[selection.FixFacts], dict[selection.Subset, list[str]]]:
    """The fixes (with this torch's patch points and touched modules) and the subsets to run."""
    if INSTALLED_HERE:  # the tests skip: list the selection without probing
        return FAMILY, selection.select(FAMILY)
    probed = patch_points()
    fixes = selection.load_facts(
        {i: row["points"] for i, row in probed.items()},
        {i: row["touched"] for i, row in probed.items()},
        {i: row["reach"] for i, row in probed.items()},
        {i: row["library"] for i, row in apply_imports().items()},
        {i: row["own"] for i, row in apply_imports().items()},
    )
    chosen = selection.powerset(fixes) if MODE == "powerset" else selection.select(fixes)
    return fixes, chosen


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "subset" in metafunc.fixturenames:
        _, chosen = plan()
        metafunc.parametrize("subset", list(chosen), ids=["+".join(s) for s in chosen])


def report(**parts: Any) -> None:
    """Merge ``parts`` into ``$COMBINATIONS_REPORT`` (when set)."""
    target = os.environ.get("COMBINATIONS_REPORT")
    if not target:
        return
    path = Path(target)
    with locked("report"):
        data = json.loads(path.read_text()) if path.is_file() else {}
        data.update(parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1, default=list, sort_keys=True))


# ---------------------------------------------------------------- discovery and reproductions


def discovered(env: dict[str, str]) -> list[list[str]]:
    """``_discover.py``'s rows (id, state, reason) in ``env``, the family's fixes only."""
    done = run([sys.executable, str(HERE / "_discover.py")], env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ids = {f.id for f in FAMILY}
    return [row for row in json.loads(done.stdout.strip().splitlines()[-1]) if row[0] in ids]


@functools.cache
def reference_order() -> tuple[str, ...]:
    """The application order with every distribution installed (discovery's, no torch)."""
    rows = discovered(child_env(install(everything())))
    assert sorted(r[0] for r in rows) == sorted(f.id for f in FAMILY), rows
    return tuple(r[0] for r in rows)


def reproduce_once(fix: str, enabled: bool, env: dict[str, str]) -> dict[str, Any]:
    """One run of ``fix``'s declared reproduction (``python -m torchfix_core.reproduction``) in
    ``env`` with the fix itself on or off, as ``torchfix-doctor verify`` runs it: the child's JSON
    record (``outcome``, or ``broke``), or ``{"broke": ...}`` with the output's tail where it printed
    none. Every run starts from an empty compile cache of its own (``TORCHINDUCTOR_CACHE_DIR``,
    which its interpreters inherit; a reproduction that names its own keeps it), so that a run
    alone, in a pair and in the full set begin alike (docs/design.md: determinism)."""
    from torchfix_core.testing import only_fix

    (workdir() / "caches").mkdir(exist_ok=True)
    cache = tempfile.mkdtemp(prefix=f"{fix}-", dir=workdir() / "caches")
    # TORCHFIX_DISABLE=all leaves the fix's own switch in charge; the subset's sitecustomize switches
    # its other members on again (a per-fix switch wins over the DISABLE list)
    extra = {**only_fix(fix, enabled), "COMBINATIONS_UNDER_TEST": fix, "TORCHINDUCTOR_CACHE_DIR": cache}
    try:
        done = run([sys.executable, "-m", "torchfix_core.reproduction", fix], {**env, **extra})
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    lines = done.stdout.strip().splitlines()
    try:
        record: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        record = {"broke": f"exit {done.returncode}, no record printed"}
    record["tail"] = f"{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    return record


def judge_reproduction(applied: bool, red: dict[str, Any], green: dict[str, Any]) -> tuple[bool, str]:
    """(as expected?, why) for one fix's red (fix off) and green (fix on) records. Where the fix is
    applied here alone, the bug shows without it and not with it. Where it is not (the bug absent
    on this torch), neither run may break. Both ``cannot-run`` (the case needs a GPU, a library this
    environment lacks) is expected either way: the row says why."""
    results = [r.get("outcome", {}).get("result") for r in (red, green)]
    if "broke" in red or "broke" in green:
        return False, f"broke: {red.get('broke') or green.get('broke')}"
    if results == ["cannot-run", "cannot-run"]:
        return True, f"cannot run here: {red['outcome']['detail']}"
    if applied:
        ok = results == ["observed", "not-observed"]
        return ok, f"without: {results[0]}, with: {results[1]}"
    return "cannot-run" not in results, f"not applied here; without: {results[0]}, with: {results[1]}"


def reproduce(fix: str, env: dict[str, str]) -> tuple[bool, str]:
    """Run ``fix``'s declared reproduction without and with the fix in ``env`` (the subset's):
    (as expected for its state alone?, output)."""
    red, green = reproduce_once(fix, False, env), reproduce_once(fix, True, env)
    ok, why = judge_reproduction(patch_points()[fix]["state"] == "applied", red, green)
    shown = {
        side: {k: v for k, v in record.items() if k != "tail"} for side, record in (("without", red), ("with", green))
    }
    output = f"{why}\n{json.dumps(shown, indent=1)}"
    if not ok:
        output += f"\n--- without:\n{red['tail']}\n--- with:\n{green['tail']}"
    return ok, output


def reproduce_recorded(fix: str, env: dict[str, str], record: Path | None = None) -> dict[str, Any]:
    """:func:`reproduce` as a result row (ok, output, seconds), with what the run reached
    (``modules``, ``codes``, ``opaque``, over every interpreter it started) where ``record`` names a
    directory for the recorder."""
    if record is not None:
        shutil.rmtree(record, ignore_errors=True)
        record.mkdir(parents=True)
        env = {**env, "COMBINATIONS_REACH": str(record)}
    started = time.perf_counter()
    ok, output = reproduce(fix, env)
    row: dict[str, Any] = {"ok": ok, "output": output, "seconds": time.perf_counter() - started}
    if record is not None:
        modules: set[str] = set()
        codes: set[str] = set()
        names: set[str] = set()
        opaque: set[str] = set()
        records = sorted(record.glob("*.json"))
        assert records, f"{fix}: the reach recorder wrote nothing in {record}"
        for one in records:
            data = json.loads(one.read_text())
            modules |= set(data["modules"])
            codes |= set(data["codes"])
            names |= set(data["names"])
            opaque |= {data["opaque"]} - {""}
        row.update(
            modules=sorted(modules),
            codes=sorted(codes),
            names=sorted(names),
            opaque="; ".join(sorted(opaque)),
            interpreters=len(records),
        )
    return row


def in_parallel(make_one: Callable[[str], dict[str, Any]], fixes: list[str]) -> dict[str, dict[str, Any]]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(jobs()) as pool:
        return dict(zip(fixes, pool.map(make_one, fixes)))


@functools.cache
def full_set_runs() -> dict[str, dict[str, Any]]:
    """Every fix's reproduction with every distribution installed and every other fix on (the full
    set): fix -> ok, output, seconds; ``jobs()`` at once (they are independent processes)."""

    def one(fix: str) -> dict[str, Any]:
        return reproduce_recorded(fix, child_env(switches(everything_ids(), ()), install(everything())))

    def make() -> dict[str, dict[str, Any]]:
        install(everything())
        return in_parallel(one, sorted(REPRODUCTIONS))

    return made_once("full-set", make)  # type: ignore[no-any-return]


@functools.cache
def alone_runs() -> dict[str, dict[str, Any]]:
    """Every fix's reproduction alone (its subset ``{fix}``),
    each interpreter recording what it reached (``REACH_RECORDER``): fix -> ok, output, seconds,
    modules, codes, opaque; ``jobs()`` at once."""
    fixes, _ = plan()

    def one(fix: str) -> dict[str, Any]:
        dists, off = selection.realize((fix,), fixes)
        env = child_env(switches((fix,), off), install(dists))
        return reproduce_recorded(fix, env, workdir() / "reach" / fix)

    return made_once("alone", lambda: in_parallel(one, sorted(REPRODUCTIONS)))  # type: ignore[no-any-return]


def everything_ids() -> selection.Subset:
    return tuple(sorted(f.id for f in FAMILY))


@functools.cache
def linked() -> dict[tuple[str, str], list[str]]:
    """``selection.channels`` from this torch's live patches and the recorded imports."""
    fixes, _ = plan()
    reached = {
        fix: selection.Reached(
            frozenset(row["modules"]), frozenset(row["codes"]), frozenset(row["names"]), row["opaque"]
        )
        for fix, row in alone_runs().items()
    }
    found = selection.channels(fixes, reached)
    report(
        channels={f"{g} -> {f}": why for (g, f), why in sorted(found.items())},
        reached={
            fix: {
                "codes": len(row["codes"]),
                "modules": len(row["modules"]),
                "opaque": row["opaque"],
                "interpreters": row["interpreters"],
                "seconds": round(row["seconds"], 1),
            }
            for fix, row in alone_runs().items()
        },
        apply_imports=apply_imports(),
    )
    return found


def applied_here() -> list[str]:
    return [fix for fix, row in patch_points().items() if row["state"] == "applied"]


# ---------------------------------------------------------------- checks


def test_every_fix_declares_its_reproduction() -> None:
    """A new fix cannot be left out of the suite silently: each family fix declares its reproduction
    (``FixSpec.reproduction``)."""
    undeclared = {f.id for f in FAMILY} - set(REPRODUCTIONS)
    assert undeclared == set(), f"declare a reproduction: {sorted(undeclared)}"


def test_the_judgement_of_a_reproduction() -> None:
    """:func:`judge_reproduction` on the records a reproduction child prints."""

    def rec(result: str, detail: str = "") -> dict[str, Any]:
        return {"outcome": {"result": result, "measure": "m", "detail": detail}}

    red, green, absent = rec("observed"), rec("not-observed"), rec("cannot-run", "needs CUDA")
    assert judge_reproduction(True, red, green)[0]
    assert not judge_reproduction(True, green, green)[0]  # the bug did not show without the fix
    assert not judge_reproduction(True, red, red)[0]  # the fix did not repair it
    assert judge_reproduction(True, absent, absent) == (True, "cannot run here: needs CUDA")
    assert not judge_reproduction(True, absent, green)[0]
    assert judge_reproduction(False, green, green)[0] and judge_reproduction(False, red, red)[0]
    assert not judge_reproduction(False, {"broke": "ValueError: x"}, green)[0]


def test_the_guard_sees_a_callable_changed_outside_the_patch_layer() -> None:
    """``_patch_points.snapshot`` (the guard's eye) notices a replaced function, a replaced method
    and a swapped ``__code__`` in a watched module, and nothing when nothing changed."""
    sys.path.insert(0, str(HERE))
    import types

    import _patch_points

    module = types.ModuleType("torch._torchfix_guard_probe")
    exec("def f():\n    return 1\nclass C:\n    def m(self):\n        return 2\n", vars(module))
    module.C.__module__ = module.__name__
    sys.modules[module.__name__] = module
    try:
        before = _patch_points.snapshot()
        again = _patch_points.snapshot()
        assert again.keys() == before.keys() and all(_patch_points._same(before[k], again[k]) for k in before)
        module.f.__code__ = (lambda: 3).__code__
        module.C.m = lambda self: 4
        after = _patch_points.snapshot()
        changed = {
            key for key, state in after.items() if key not in before or not _patch_points._same(before[key], state)
        }
        assert changed == {(module.__name__, "f"), (f"{module.__name__}.C", "m")}, changed
    finally:
        del sys.modules[module.__name__]


#: what a distribution's declaration modules may call at module level (torchfix_core.spec's records)
DECLARING_CALLS = {"FixSpec", "EnvSwitch", "Signature", "Reproduction", "lazy_version"}


def test_the_modules_every_fix_of_a_distribution_loads_hold_declarations_only() -> None:
    """What ``selection.shared_modules`` leaves out (``DECLARATIONS``: a distribution's
    ``__init__``, ``package`` and ``version``) holds no state two fixes could share: at module
    level only docstrings, imports, function definitions, ``if TYPE_CHECKING:`` blocks, ``__all__``
    and assignments of constants or of ``FixSpec`` / ``EnvSwitch`` / ``Signature`` / ``Reproduction`` /
    ``lazy_version`` records; no ``global`` statement anywhere."""
    import ast

    problems = []
    for dist in sorted({f.distribution for f in FAMILY}):
        (top,) = [d for d in (PACKAGES / dist / "src").iterdir() if d.is_dir() and (d / "__init__.py").is_file()]
        for suffix in selection.DECLARATIONS:
            path = top / ("__init__.py" if not suffix else f"{suffix[1:]}.py")
            if not path.is_file():
                continue
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, (ast.Global, ast.Nonlocal)):
                    problems.append(f"{path.name}:{node.lineno}: {type(node).__name__.lower()} statement")
            for node in tree.body:
                if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef)):
                    continue
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                    continue
                if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                    continue
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    value = node.value
                    if [ast.unparse(t) for t in targets] == ["__all__"] and isinstance(value, ast.List):
                        continue
                    calls = [c for c in ast.walk(value) if isinstance(c, ast.Call)]
                    mutable = isinstance(value, (ast.List, ast.Dict, ast.Set))  # a record's arguments may be lists
                    if not mutable and all(ast.unparse(c.func) in DECLARING_CALLS for c in calls):
                        continue
                problems.append(f"{dist}/{path.name}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert problems == [], problems


def recorder_only() -> Path:
    """A ``switches`` directory for the recorder alone: its one member names no fix, and is the
    one "under test" (``RECORDER_ONLY``), so its ``sitecustomize.py`` switches nothing on."""
    return switches((RECORDER_ONLY["COMBINATIONS_UNDER_TEST"],), ())


RECORDER_ONLY = {"COMBINATIONS_UNDER_TEST": "recorder-probe"}


def test_the_work_directory_is_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative ``COMBINATIONS_WORKDIR`` (nox's own temporary directory is relative) is made absolute:
    the reproductions' Inductor caches live below it and Inductor's C++ builds run elsewhere (torch
    2.10's cpp-wrapper builds failed with "No such file or directory" from a relative one)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COMBINATIONS_WORKDIR", "relative/work")
    path = workdir.__wrapped__()
    assert path.is_absolute() and path == tmp_path / "relative" / "work" and path.is_dir()


def test_the_reach_recorder_sees_every_interpreter_thread_and_exit(tmp_path: Path) -> None:
    """What ``channels`` trusts of a run alone: the recorder sees a function entered on the main
    thread, on a ``threading`` thread, in a child interpreter, and a run that leaves by
    ``os._exit``; a function never called is not in the record."""
    script = tmp_path / "scenario.py"
    script.write_text(
        "import os, subprocess, sys, threading\n"
        "def on_main():\n    pass\n"
        "def on_thread():\n    pass\n"
        "def never():\n    pass\n"
        "def in_child():\n    pass\n"
        "if sys.argv[1:] == ['child']:\n    in_child()\n    sys.exit(0)\n"
        "on_main()\n"
        "t = threading.Thread(target=on_thread)\nt.start()\nt.join()\n"
        "subprocess.run([sys.executable, __file__, 'child'], check=True)\n"
        "os._exit(0)\n"
    )
    record = tmp_path / "record"
    record.mkdir()
    env = child_env(recorder_only(), COMBINATIONS_REACH=str(record), **RECORDER_ONLY)
    done = run([sys.executable, str(script)], env, timeout=120)
    assert done.returncode == 0, done.stderr
    records = [json.loads(one.read_text()) for one in sorted(record.glob("*.json"))]
    assert len(records) == 2, records  # the scenario and its child
    codes = {code for one in records for code in one["codes"]}
    keys = {
        name: f"{script}:{line}:{name}"
        for name, line in (("on_main", 2), ("on_thread", 4), ("never", 6), ("in_child", 8))
    }
    assert {keys["on_main"], keys["on_thread"], keys["in_child"]} <= codes and keys["never"] not in codes
    assert all("threading" in one["modules"] and one["opaque"] == "" for one in records)


@pytest.mark.slow
@skip_installed_here
def test_the_reach_recorder_sees_code_dynamo_traces_on_this_torch(tmp_path: Path) -> None:
    """On this torch, a function Dynamo inlines into a full graph (its bytecode is traced, never
    run) is in the record: the translators' ``__init__`` still takes the code object, as the
    recorder expects. A release that changed that would fail here, not hide channels."""
    script = tmp_path / "traced.py"
    script.write_text(
        "import torch\n"
        "def traced_only(x):\n    return x.sin() + 1\n"
        "@torch.compile(backend='eager', fullgraph=True)\n"
        "def compiled(x):\n    return traced_only(x) * 2\n"
        "compiled(torch.ones(3))\n"
    )
    record = tmp_path / "record"
    record.mkdir()
    env = child_env(recorder_only(), COMBINATIONS_REACH=str(record), TORCHFIX_AUTOLOAD="0", **RECORDER_ONLY)
    done = run([sys.executable, str(script)], env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (only,) = [json.loads(one.read_text()) for one in record.glob("*.json")]
    assert f"{script}:2:traced_only" in only["codes"], "Dynamo's translators no longer take the code object"
    assert "torch._dynamo" in only["modules"] and only["opaque"] == ""


@pytest.mark.slow
@skip_installed_here
def test_no_fix_changes_code_outside_its_live_patches() -> None:
    """The guard of docs/design.md's argument: a fix reaches other code only through its live
    patches, so the channels of ``selection.channels`` are all there are."""
    fixes, chosen = plan()
    probed = patch_points()
    report(
        torch=__import__("torch").__version__,
        mode=MODE,
        fixes=len(fixes),
        powerset_size=2 ** len(fixes) - 1,
        patch_points=probed,
        groups=[vars(g) for g in selection.groups(fixes)],
        subsets=[{"fixes": list(s), "why": why} for s, why in chosen.items()],
    )
    hidden = {fix: row["hidden"] for fix, row in probed.items() if row["hidden"]}
    assert hidden == {}, f"fixes changing callables outside their live patches: {hidden}"


@pytest.mark.slow
@skip_installed_here
def test_coexistence_of_every_selected_subset_and_every_pair() -> None:
    fixes, chosen = plan()
    ids = [f.id for f in fixes]
    subsets = sorted({*chosen, *itertools.combinations(sorted(ids), 2)}, key=lambda s: (len(s), s))
    plan_file = workdir() / "coexistence.json"
    reference = {fix: row["state"] for fix, row in patch_points().items()}
    plan_file.write_text(json.dumps({"reference": reference, "subsets": [list(s) for s in subsets]}))
    env = child_env(install(everything()), TORCHFIX_AUTOLOAD="0")
    done = run([sys.executable, str(HERE / "_coexistence.py"), str(plan_file)], env, timeout=3600)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    report(coexistence={"subsets": len(subsets), "seconds": result["seconds"]})
    problems = {"+".join(r["subset"]): r["problems"] for r in result["results"] if r["problems"]}
    assert problems == {}, problems


@pytest.mark.slow
@skip_installed_here
def test_subset_discovery_order_and_reproductions(subset: selection.Subset) -> None:
    fixes, _ = plan()
    dists, off = selection.realize(subset, fixes)
    env = child_env(switches(subset, off), install(dists))
    rows = discovered(env)
    installed = set(subset) | set(off)
    assert [r[0] for r in rows] == [i for i in reference_order() if i in installed], rows
    for fix_id, state, reason, switched_off, why in rows:
        assert state == "pending", (fix_id, state, reason)  # discovered, none failed
        if fix_id in off:
            assert switched_off and selection.enabled_variable(fix_id) in why, (fix_id, why)
        else:
            assert not switched_off, (fix_id, why)
    links = linked() if len(subset) == 2 else {}  # only a pair reads the channels
    runs = selection.reproduce_in(subset, everything_ids(), REPRODUCTIONS, links, applied_here())
    for fix in runs:
        if subset == everything_ids() or len(subset) == 1:
            row = (full_set_runs() if len(subset) > 1 else alone_runs())[fix]
            ok, output = row["ok"], row["output"]
        else:
            ok, output = reproduce(fix, env)
        assert ok, f"{fix} reproduction with {subset} ({patch_points()[fix]['state']} alone):\n{output}"
