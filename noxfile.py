"""Sessions of the torchfix monorepo.

    nox -t ci                    what CI runs: lint, tests, te(2.18.0), ...
    nox -s tests                 every package's tests + tests/ against the default torch (2.13.0)
    nox -s "te(2.18.0)"          torchfix-fp8-recompute on one TransformerEngine release (1.13 ... 2.20)
    nox -s "tests_torch(2.15.0)" the same against another torch release (2.8 ... 2.15)
    nox -s tests_python          the same on Python 3.10 and 3.12 (default torch)
    nox -s "combinations(2.13.0)" every fix alone, all, every pair and every subset of a group
                                 (shared distribution/trigger/after/patch point), as real wheels;
                                 reproductions in the full set and in pairs with a channel
    nox -s "combinations_powerset(2.13.0)" every non-empty subset of the fixes (opt-in)
    nox -s magi                  the MagiCompiler adapters on Magi's real source (default torch; ci)
    nox -s "magi_torch(2.10.0)"  the same against torch 2.10 / 2.11 / 2.12 (uv, opt-in)
    nox -s matrix                all of the above, then scripts/compatibility.py writes
                                 docs/compatibility.md from .matrix-results/
    nox -s lint typecheck        ruff check + format check; mypy
    nox -s import_time           what activation adds to `import torch` (benchmarks/import_time.py)
    nox -s demo                  doctor output, activation, and each fix's demo section

The default sessions use pip (which, on the CPU CI machines, finds the local CPU build of torch
2.13.0); the torch matrix uses uv, which installs the 4.5 GB CUDA builds from its cache quickly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT / "scripts"))
import family  # noqa: E402 - scripts/family.py: the one list of the family's packages

PACKAGES = family.PACKAGES
FIXTURES = family.core() / "tests" / "fixtures"
DEFAULT_TORCH = "2.13.0"
TORCH_MATRIX = ["2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.0", "2.13.0", "2.14.1", "2.15.0"]
REDIS_CLIENT = "redis>=5"
TEST_TOOLS = ["pytest>=7", "hatchling>=1.21", "packaging>=22", "numpy", "pip", "setuptools", REDIS_CLIENT]
# pip: tests install fixtures; setuptools: Inductor's CPU builder on torch 2.10 imports it; redis: the
# client of torch's Redis remote caches (redis-cache-errors' tests and placement-cache's Redis tests start
# a real redis-server where the machine has the binary, and skip saying so where it has not)
MATRIX_PYTHONS = ["3.10", "3.12"]  # besides the default 3.11
# A patch release the matrix covers by its base's column (docs/design.md, "Patch releases"): `twin`
# checks that its Python sources are the base's but torch/version.py and that every fix decides the
# same there; scripts/compatibility.py --check fails while a twin is unrecorded or found to differ
# (then it becomes a column of TORCH_MATRIX).
PATCH_TWINS = {"2.12.1": "2.12.0"}
RESULTS = ROOT / ".matrix-results"  # one folder per matrix cell, read by scripts/compatibility.py

TE_VERSIONS = ["1.13.0", "2.1.0", "2.8.0", "2.14.1", "2.18.0", "2.19.0", "2.20.2"]
# each fix's last release with its bug and first without: fp8-recompute 2.18.0 / 2.19.0,
# fp8-recompute-pairing 2.19.0 / 2.20.2. CI runs 2.18.0, where both bugs exist (each fix red without /
# green with); the not-needed releases 2.19.0 / 2.20.2 run in the workflow's te matrix and `nox -s te`
# (each TE session takes ~5 min here: .ci/run keeps to its 45-minute budget).
TE_IN_CI = ("2.18.0",)
TE_PURE_PYTHON_DEPS = ["pydantic", "einops", "onnx", "onnxscript", "nvdlfw-inspect", "packaging", "numpy", "triton"]

# uv installs without bytecode, and the tests' environments set PYTHONDONTWRITEBYTECODE (no __pycache__
# in the source tree): every interpreter a test starts would then compile torch's Python sources
# again, about 2 s of `import torch` and 9 s of Dynamo + Inductor each on this machine (measured
# 2026-12-02: 4.2 s -> 2.1 s and 14.6 s -> 5.8 s on torch 2.12.0). pip compiles by default; uv is
# told to, here, for every uv session (torch 2.12.0 installed and compiled in about 13 s).
os.environ.setdefault("UV_COMPILE_BYTECODE", "1")

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = False


fix_packages = family.fix_packages


def install_torchfix(session: nox.Session, *, fixtures: bool = True) -> None:
    """Install torchfix-core, every fix package and torchfix-all as real wheels (entry points and
    all), plus (``fixtures``) the test-tree fixes used by the core's tests, into
    :func:`fixture_site`."""
    session.install("--no-build-isolation", *map(str, family.all_packages()))
    if fixtures:
        demos = [FIXTURES / "torchfix-demo-checkpoint", FIXTURES / "torchfix-demo-dynamo"]
        pip = ["python", "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "--upgrade"]
        session.run(*pip, "--target", str(fixture_site(session)), *map(str, demos))


def fixture_site(session: nox.Session) -> Path:
    """Where the test-tree fixes are installed (``pip --target``): on ``PYTHONPATH`` of
    torchfix-core's own tests only, so that every other test runs in what a user's environment
    holds (the real fixes, whose trigger index lets activation defer loading their specs; a
    fixture, without an index, would make it immediate)."""
    return Path(session.virtualenv.location) / "torchfix-test-fixtures"


def test_dirs() -> list[Path]:
    """Every package's tests, then the cross-package tests. ``MATRIX_ONLY=torchfix-x,cross-package``
    (a partial re-run of a matrix cell, e.g. after adding a fix to those packages) keeps only those
    packages' directories; the cell records that (``partial.txt``) and scripts/compatibility.py
    keeps the recorded results of the others."""
    dirs = [*(p / "tests" for p in family.member_packages() if (p / "tests").is_dir()), ROOT / "tests"]
    only = [name for name in os.environ.get("MATRIX_ONLY", "").split(",") if name]
    if only:
        unknown = sorted(set(only) - {test_dir_name(d) for d in dirs})
        if unknown:
            raise SystemExit(f"MATRIX_ONLY names no package with tests (nor cross-package): {unknown}")
        return [d for d in dirs if test_dir_name(d) in only]
    return dirs


def test_dir_name(directory: Path) -> str:
    """A test directory's name in a matrix cell: its package's, or ``cross-package`` for tests/."""
    return directory.parent.name if directory.parent != ROOT else "cross-package"


# read once and taken out of the environment: every test process (and the doctor report of each
# matrix cell) would otherwise see a TORCHFIX_ variable torchfix-core does not know, and warn about it
_TEST_JOBS = os.environ.pop("TORCHFIX_TEST_JOBS", "")


def test_jobs(default: int) -> int:
    """How many test directories run at once: ``TORCHFIX_TEST_JOBS`` (a positive integer; the
    noxfile removes it from the sessions' environment), else ``default``. A malformed value stops
    the session with the value named."""
    raw = _TEST_JOBS.strip()
    if not raw:
        return max(1, default)
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"TORCHFIX_TEST_JOBS must be a positive integer, got {raw!r}")
    return int(raw)


def recorded_seconds(cell: str) -> dict[str, float]:
    """Each test directory's seconds in the recorded matrix cell ``cell`` (docs/results/matrix/), or
    nothing: the parallel runner starts the longest directories first."""
    path = ROOT / "docs" / "results" / "matrix" / f"{cell}.json"
    if not path.is_file():
        return {}
    reports = json.loads(path.read_text()).get("reports", {})
    return {name: float(counts.get("seconds", 0)) for name, counts in reports.items()}


def run_pytest(session: nox.Session, cell: str | None = None, jobs: int = 1) -> None:
    """One pytest run per package (tests live beside each package and share file names such as
    test_contract.py), then the cross-package tests; every run must pass.

    With ``cell`` (a matrix cell's name) each run also writes a JUnit report, and the cell's doctor
    report and versions, under ``.matrix-results/<cell>/``; every package runs even when an earlier
    one failed, and the session fails at the end if any did.

    With ``jobs`` > 1, that many directories run at once (longest first, by the recorded cell's
    times), each with its own ``TMPDIR`` (so its own default Inductor cache and pytest temporary
    directories) and its output printed whole when it ends; every directory runs, and the session
    fails at the end naming those that failed. Each run is single-process (one core), and the tests'
    rendezvous use file stores or free ports, so directories do not share state."""
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    failed: list[str] = []
    out = start_cell(session, cell) if cell else None
    fixtures = fixture_site(session)
    runs: list[tuple[str, list[str], dict[str, str]]] = []
    for directory in test_dirs():
        name = test_dir_name(directory)
        report = ["--junitxml", str(out / f"{name}.xml")] if out is not None else []
        own = {"PYTHONPATH": str(fixtures)} if directory.parent == family.core() and fixtures.is_dir() else {}
        argv = ["python", "-m", "pytest", "-q", "-m", "not gpu and not slow", *report, *session.posargs, str(directory)]
        runs.append((name, argv, {**env, **own}))
    if jobs > 1 and len(runs) > 1:
        failed = run_in_parallel(session, runs, jobs, recorded_seconds(cell or ""))
    else:
        for name, argv, run_env in runs:
            try:
                session.run(*argv, env=run_env)
            except nox.command.CommandFailed:
                if out is None:
                    raise
                failed.append(name)
    if failed:
        session.error(f"tests failed in: {', '.join(failed)}")


def run_in_parallel(
    session: nox.Session, runs: list[tuple[str, list[str], dict[str, str]]], jobs: int, seconds: dict[str, float]
) -> list[str]:
    """Run ``runs`` (name, argv, extra env), ``jobs`` at a time, longest (``seconds``) first; print
    each one's output when it ends; return the names of those that failed."""
    import tempfile
    import time

    if session.bin is None:  # nox's "none" backend: no interpreter of the session's own
        session.error("parallel test runs need the session's virtualenv")
    # absolute: each run's TMPDIR, where Inductor's caches go (its C++ builds run in another directory)
    scratch = Path(tempfile.mkdtemp(prefix="test-dirs-", dir=Path(session.create_tmp()).resolve()))
    base = {**os.environ, **{k: v for k, v in session.env.items() if v is not None}}
    base["PATH"] = os.pathsep.join([session.bin, base.get("PATH", "")])
    base["VIRTUAL_ENV"] = str(session.virtualenv.location)
    pending = sorted(runs, key=lambda run: -seconds.get(run[0], 0.0))
    running: list[tuple[str, subprocess.Popen[bytes], Path, float]] = []
    failed: list[str] = []
    while pending or running:
        while pending and len(running) < jobs:
            name, argv, extra = pending.pop(0)
            tmp = scratch / name / "tmp"
            tmp.mkdir(parents=True)
            log = scratch / name / "output.log"
            argv = [str(Path(session.bin) / argv[0]), *argv[1:]]
            session.log(f"[{name}] started: {' '.join(argv[1:])}")
            with log.open("wb") as sink:
                process = subprocess.Popen(
                    argv, cwd=ROOT, env={**base, **extra, "TMPDIR": str(tmp)}, stdout=sink, stderr=subprocess.STDOUT
                )
            running.append((name, process, log, time.monotonic()))
        time.sleep(0.5)
        for entry in [entry for entry in running if entry[1].poll() is not None]:
            running.remove(entry)
            name, process, log, began = entry
            sys.stdout.write(log.read_text(errors="replace"))
            sys.stdout.flush()
            verdict = "passed" if process.returncode == 0 else f"FAILED (exit {process.returncode})"
            session.log(f"[{name}] {verdict} in {time.monotonic() - began:.0f} s")
            if process.returncode != 0:
                failed.append(name)
    return failed


def start_cell(session: nox.Session, cell: str) -> Path:
    """``.matrix-results/<cell>/`` emptied, with the environment's doctor report and the commit.
    The report's warnings go to ``doctor-stderr.txt`` beside it: ``doctor.json`` stays JSON."""
    out = RESULTS / cell
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*"):
        stale.unlink()
    with (out / "doctor.json").open("w") as handle, (out / "doctor-stderr.txt").open("w") as warnings:
        session.run("python", "-m", "torchfix_core", "--json", stdout=handle, stderr=warnings)
    try:
        git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        commit = git.stdout.strip() or "?"
    except OSError:  # no git on this machine
        commit = "?"
    (out / "commit.txt").write_text(commit)
    if os.environ.get("MATRIX_ONLY"):
        (out / "partial.txt").write_text(os.environ["MATRIX_ONLY"])
    return out


@nox.session(tags=["ci"])
def tests(session: nox.Session) -> None:
    """All tests on the default torch (CPU build where the machine has one)."""
    session.install(f"torch=={DEFAULT_TORCH}", *TEST_TOOLS)
    install_torchfix(session)
    session.run("python", str(ROOT / "scripts" / "generate.py"), "--check")
    session.run("python", str(ROOT / "scripts" / "compatibility.py"), "--check")
    # the default matrix cell; its directories run side by side, one per core
    run_pytest(session, cell=f"torch-{DEFAULT_TORCH}-py{python_version(session)}", jobs=test_jobs(os.cpu_count() or 1))


@nox.session(venv_backend="uv|virtualenv")
@nox.parametrize("torch", [nox.param(v, id=v) for v in TORCH_MATRIX])
def tests_torch(session: nox.Session, torch: str) -> None:
    """All tests against one torch release (CUDA builds from the registry run on the CPU); results
    under .matrix-results/torch-<torch>-py<python>/."""
    session.install(f"torch=={torch}", *TEST_TOOLS)
    install_torchfix(session)
    run_pytest(session, cell=f"torch-{torch}-py{python_version(session)}", jobs=test_jobs(1))


@nox.session(venv_backend="uv|virtualenv", python=MATRIX_PYTHONS)
def tests_python(session: nox.Session) -> None:
    """All tests on another Python (default torch; off the CPU machine's 3.11 build, the registry's)."""
    session.install(f"torch=={DEFAULT_TORCH}", *TEST_TOOLS)
    install_torchfix(session)
    run_pytest(session, cell=f"torch-{DEFAULT_TORCH}-py{python_version(session)}", jobs=test_jobs(1))


def _combinations(session: nox.Session, torch: str, selection: str) -> None:
    """torch + torchfix-core (+ TransformerEngine's Python sources with the test stand-ins, so that
    fp8-recompute's reproduction runs), no fix package: tests/combinations/ builds the fix
    distributions into wheels and installs each subset into its own target directory. Results
    (JUnit report, the selection with its groups and patch points) in .matrix-results/<cell>/."""
    session.install(f"torch=={torch}", *TEST_TOOLS, "pytest-xdist", *TE_PURE_PYTHON_DEPS)
    session.install("--no-deps", f"transformer-engine=={TE_IN_CI[0]}")
    session.install("--no-deps", "--no-build-isolation", str(family.core()))
    session.run("python", str(PACKAGES / "torchfix-fp8-recompute" / "tests" / "te_standins" / "install.py"))
    cell = "combinations" if selection == "selection" else "combinations_powerset"
    out = start_cell(session, f"{cell}-{torch}")
    # one pytest worker per core (TORCHFIX_TEST_JOBS): the subsets' tests are independent processes;
    # the workers share one fresh work directory (wheels, installs, probes, the full set: each made
    # once, under a lock), and the full set's reproductions run as many at once
    jobs = test_jobs(os.cpu_count() or 1)
    # absolute (nox's temporary directory is relative to where nox runs): the reproductions' Inductor
    # caches live below it, and Inductor compiles C++ in a directory of its own
    workdir = Path(session.create_tmp()).resolve() / f"{cell}-work"
    shutil.rmtree(workdir, ignore_errors=True)
    env = {
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        "COMBINATIONS_SELECTION": selection,
        "COMBINATIONS_REPORT": str(out / "selection.json"),
        "COMBINATIONS_WORKDIR": str(workdir),
        "COMBINATIONS_JOBS": str(jobs),
    }
    workers = ["-n", str(jobs)] if jobs > 1 else []
    started = time.monotonic()
    try:
        session.run(
            "python",
            "-m",
            "pytest",
            "-q",
            "-rs",
            *workers,
            "--junitxml",
            str(out / "combinations.xml"),
            *session.posargs,
            str(ROOT / "tests" / "combinations"),
            env=env,
        )
    finally:  # the page's "minutes": wall time (the JUnit sum counts each worker's time)
        run = {"wall_seconds": round(time.monotonic() - started), "workers": jobs, "cores": os.cpu_count()}
        (out / "run.json").write_text(json.dumps(run) + "\n")


@nox.session(venv_backend="uv|virtualenv")
@nox.parametrize("torch", [nox.param(v, id=v) for v in TORCH_MATRIX])
def combinations(session: nox.Session, torch: str) -> None:
    """The combination suite on one torch release: every fix alone, all of them, every pair, and
    every subset of each group of fixes sharing a distribution, a trigger module, an ``after`` edge
    or a patch point (tests/combinations/selection.py), each installed as real wheels; per subset,
    discovery and order; the co-existence of every subset and pair in one interpreter; each fix's
    own reproduction (red without it, green with it) with the rest of the subset active: alone (where
    a recorder notes what it reaches), in the full set, and in every pair with a channel
    (docs/design.md, "Combination suite"). Results and times:
    docs/compatibility.md, "Combinations"."""
    _combinations(session, torch, "selection")


@nox.session(venv_backend="uv|virtualenv")
@nox.parametrize("torch", [nox.param(v, id=v) for v in TORCH_MATRIX])
def combinations_powerset(session: nox.Session, torch: str) -> None:
    """Opt-in: every non-empty subset of the family's fixes (2^n - 1 for n fixes) on one torch
    release, with the same checks as ``combinations`` (docs/design.md, "Combination suite", says
    what it costs at the family's present size)."""
    _combinations(session, torch, "powerset")


@nox.session(venv_backend="uv|virtualenv")
@nox.parametrize("torch", [nox.param(v, id=v) for v in PATCH_TWINS])
def twin(session: nox.Session, torch: str) -> None:
    """Whether the patch release ``torch`` is a twin of its base (``PATCH_TWINS``): the base's wheel
    unpacked beside the release, every file compared (scripts/release_twin.py), and this
    environment's doctor report, which scripts/compatibility.py compares with the base's recorded
    cell. Results under .matrix-results/twin-<torch>/ (``twin.json``, ``doctor.json``)."""
    base = PATCH_TWINS[torch]
    # numpy and the redis client: as in the cells (a fix's state may depend on them)
    session.install(f"torch=={torch}", "packaging", "hatchling>=1.21", "numpy", REDIS_CLIENT)
    install_torchfix(session, fixtures=False)
    unpacked = Path(session.create_tmp()).resolve() / f"torch-{base}"
    shutil.rmtree(unpacked, ignore_errors=True)
    session.install("--no-deps", "--target", str(unpacked), f"torch=={base}", env={"UV_COMPILE_BYTECODE": "0"})
    out = start_cell(session, f"twin-{torch}")
    session.run(
        "python", str(ROOT / "scripts" / "release_twin.py"), "--base", str(unpacked), "--out", str(out / "twin.json")
    )
    shutil.rmtree(unpacked, ignore_errors=True)


@nox.session
def matrix(session: nox.Session) -> None:
    """The full matrix: every torch release, the patch releases' twin checks, the extra Pythons, every TransformerEngine release
    (fp8-recompute), the Magi adapters on the default torch and each of ``MAGI_TORCH``, the
    combination suite, then docs/compatibility.md regenerated from .matrix-results/ (sessions run
    one after another)."""
    for torch in TORCH_MATRIX:
        session.notify(f"tests_torch({torch})")
    for torch in PATCH_TWINS:
        session.notify(f"twin({torch})")
    for python in MATRIX_PYTHONS:
        session.notify(f"tests_python-{python}")
    for te in TE_VERSIONS:
        session.notify(f"te({te})")
    session.notify("magi")
    for torch in MAGI_TORCH:
        session.notify(f"magi_torch({torch})")
    for torch in TORCH_MATRIX:  # notify() stops at the first session a name matches: one call per release
        session.notify(f"combinations({torch})")
    session.notify("compatibility")


@nox.session
def compatibility(session: nox.Session) -> None:
    """Record the cells under .matrix-results/ in docs/results/matrix/, then write docs/compatibility.md
    from every recorded cell (needs every fix package's metadata)."""
    session.install("packaging", "hatchling")
    session.install("--no-deps", "--no-build-isolation", *map(str, family.member_packages()))
    session.run("python", str(ROOT / "scripts" / "compatibility.py"), "--write", *session.posargs)


def python_version(session: nox.Session) -> str:
    """``3.11`` for the session's interpreter."""
    out = session.run("python", "-c", "import sys; print('%d.%d' % sys.version_info[:2])", silent=True)
    return str(out).strip()


@nox.session(venv_backend="uv|virtualenv")
@nox.parametrize("te", [nox.param(v, id=v, tags=["ci"] if v in TE_IN_CI else []) for v in TE_VERSIONS])
def te(session: nox.Session, te: str) -> None:
    """torchfix-fp8-recompute against the real Python sources of one TransformerEngine release.

    TE's compiled parts (the CUDA core library, the transformer_engine_torch extension) do not exist
    on a CPU machine: tests/te_standins/ provides stand-ins for them (see its files), nothing else.
    TE 1.x needs torch <= 2.8 (its softmax.py imports torch.onnx._type_utils, removed in 2.9).
    """
    package = PACKAGES / "torchfix-fp8-recompute"
    torch = "torch==2.8.0" if te.startswith("1.") else f"torch=={DEFAULT_TORCH}"
    session.install(torch, *TEST_TOOLS, *TE_PURE_PYTHON_DEPS)
    session.install("--no-deps", f"transformer-engine=={te}")
    # torchfix-all without its dependencies: the family's catalog, which the signature tests' isolated
    # explain reads to name the fix as not installed
    session.install("--no-deps", "--no-build-isolation", str(family.core()), str(package), str(family.meta_package()))
    session.run("python", str(package / "tests" / "te_standins" / "install.py"))
    out = start_cell(session, f"te-{te}")  # a TransformerEngine column of docs/compatibility.md
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    report = ["--junitxml", str(out / f"{package.name}.xml")]
    session.run(
        "python", "-m", "pytest", "-q", "-m", "not gpu", *report, *session.posargs, str(package / "tests"), env=env
    )


@nox.session(tags=["ci"])
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("mypy", f"torch=={DEFAULT_TORCH}", "packaging", "pytest", "hatchling")
    install_torchfix(session, fixtures=False)
    sources = [str(p / "src") for p in family.member_packages()]
    session.run("mypy", *sources)


@nox.session
def import_time(session: nox.Session) -> None:
    """Measure what torchfix adds to `import torch` (all real fixes installed, no test fixtures)."""
    session.install(f"torch=={DEFAULT_TORCH}", "packaging", "hatchling")
    install_torchfix(session, fixtures=False)
    session.run("python", str(ROOT / "benchmarks" / "import_time.py"), *session.posargs)


@nox.session
def demo(session: nox.Session) -> None:
    """What torchfix does, in a few minutes on a CPU: activation, doctor, each fix before/after."""
    # uv: the fp8-recompute section builds a TransformerEngine test environment with it
    session.install(f"torch=={DEFAULT_TORCH}", "packaging", "hatchling", "numpy", "uv")
    install_torchfix(session, fixtures=False)
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    session.run("python", str(ROOT / "scripts" / "demo_activation.py"), env=env)
    session.run("python", str(ROOT / "scripts" / "demo_diagnosis.py"), env=env)
    for package in fix_packages():
        script = package / "demo.py"
        if script.is_file():
            session.run("python", str(script), env=env)
    session.run("python", str(ROOT / "scripts" / "demo_gpu_results.py"))
    session.run("torchfix-doctor")


# ---------------------------------------------------------------------------------------------------
# Release engineering (docs/releasing.md): build and check the distributions, install them from the
# wheelhouse as a user would, one distribution's tests for a release, and the weekly upstream watch.
# Self-contained: these sessions share only family, DEFAULT_TORCH, TEST_TOOLS, TE_PURE_PYTHON_DEPS and
# install_torchfix with the rest of this file.

DIST = ROOT / "dist"  # the wheelhouse: the family's sdists and wheels, plus their third-party requirements
BUILD_TOOLS = ["build>=1.2", "twine>=5"]
UPSTREAM_WATCH = ROOT / ".upstream-watch"
NIGHTLY_INDEX = "https://download.pytorch.org/whl/nightly/cpu"


@nox.session(tags=["ci"])
def build(session: nox.Session) -> None:
    """An sdist and a wheel of every distribution (or of those named in posargs) into dist/, each in an
    isolated build environment (hatchling from the index), then: ``twine check --strict`` (metadata
    renders), scripts/build_check.py (product code only, entry points resolve inside their own wheel,
    the sdist rebuilds into the same wheel), and the third-party runtime requirements downloaded into
    dist/ so that ``pip install --no-index --find-links dist torchfix-all`` needs nothing else."""
    import shutil

    packages = [family.by_name(name) for name in session.posargs] or family.all_packages()
    session.install(*BUILD_TOOLS)
    if DIST.exists():
        shutil.rmtree(DIST)
    for package in packages:
        session.run("python", "-m", "build", "--sdist", "--wheel", "--outdir", str(DIST), str(package))
    session.run("twine", "check", "--strict", *sorted(str(p) for p in DIST.iterdir()))
    check = str(ROOT / "scripts" / "build_check.py")
    session.run("python", check, "check", str(DIST), *(p.name for p in packages))
    requirements = str(session.run("python", check, "requirements", str(DIST), silent=True)).split("\n")
    requirements = [r.strip() for r in requirements if r.strip()]
    if requirements:
        session.run(
            "python", "-m", "pip", "download", "-q", "--only-binary", ":all:", "--dest", str(DIST), *requirements
        )


@nox.session(tags=["ci"], requires=["build"])
def install_check(session: nox.Session) -> None:
    """From dist/ alone, in fresh venvs: torchfix-all, then torchfix-sac-replay on its own (only core
    comes with it); doctor without torch (exit 3, "torch: not installed"), then with torch
    DEFAULT_TORCH added (every fix's state). scripts/install_check.py; posargs go to it."""
    if not any(DIST.glob("*.whl")):
        session.error("dist/ holds no wheels: run `nox -s build` first")
    script = str(ROOT / "scripts" / "install_check.py")
    session.run("python", script, str(DIST), "--torch", DEFAULT_TORCH, *session.posargs)


@nox.session
def release_tests(session: nox.Session) -> None:
    """The tests of one distribution (posargs: its name) and the cross-package tests, on the default
    torch: what release.yml runs before publishing that distribution."""
    if len(session.posargs) != 1:
        session.error("usage: nox -s release_tests -- <distribution>, e.g. torchfix-autotune")
    package = family.by_name(session.posargs[0])
    session.install(f"torch=={DEFAULT_TORCH}", *TEST_TOOLS)
    install_torchfix(session)
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    dirs = [package / "tests"] if (package / "tests").is_dir() else []
    for directory in [*dirs, ROOT / "tests"]:
        own = {"PYTHONPATH": str(fixture_site(session))} if directory.parent == family.core() else {}
        session.run("python", "-m", "pytest", "-q", "-m", "not gpu and not slow", str(directory), env={**env, **own})


def _reachable(url: str, timeout: float = 20) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - a fixed https URL
            return bool(response.status == 200)
    except OSError:
        return False


@nox.session(venv_backend="uv|virtualenv")
def upstream_watch(session: nox.Session) -> None:
    """The newest torch release, then the newest nightly (where NIGHTLY_INDEX can be reached), each
    with the newest TransformerEngine (Python sources + the CPU stand-ins) and the whole family:
    every fix's probe and red reproduction (scripts/upstream_watch.py); report in
    .upstream-watch/report.md. posargs go to ``upstream_watch.py collect`` (e.g. --no-reproductions)."""
    UPSTREAM_WATCH.mkdir(exist_ok=True)
    for stale in UPSTREAM_WATCH.glob("*"):
        stale.unlink()
    script = str(ROOT / "scripts" / "upstream_watch.py")
    te_standins = PACKAGES / "torchfix-fp8-recompute" / "tests" / "te_standins" / "install.py"
    notes = []
    cells = [("newest release", ["--upgrade", "torch"])]
    if _reachable(f"{NIGHTLY_INDEX}/torch/"):
        cells.append(("newest nightly", ["--upgrade", "--pre", "--index-url", NIGHTLY_INDEX, "torch"]))
    else:
        notes.append(f"the nightly index {NIGHTLY_INDEX} could not be reached: ran on the newest release only")
    session.install(*TEST_TOOLS, *TE_PURE_PYTHON_DEPS)
    session.install("--no-deps", "--upgrade", "transformer-engine")
    install_torchfix(session, fixtures=False)
    session.run("python", str(te_standins))
    results = []
    for label, torch in cells:
        session.install(*torch)
        out = UPSTREAM_WATCH / f"{label.replace(' ', '-')}.json"
        session.run("python", script, "collect", "--label", label, "--out", str(out), *session.posargs)
        results.append(str(out))
    note_args = [arg for note in notes for arg in ("--note", note)]
    session.run("python", script, "report", *results, *note_args, "--out", str(UPSTREAM_WATCH / "report.md"))


# ---------------------------------------------------------------------------------------------------
# Real clients (docs/clients.md): torchfix under code nobody here wrote. A Redis server shared as
# Inductor's remote compile cache (placement-cache), torchtitan's own training pieces and Hugging Face
# transformers' models (tests/clients/). Self-contained: these sessions share only family,
# DEFAULT_TORCH, TEST_TOOLS and install_torchfix with the rest of this file.

REDIS_TEST = PACKAGES / "torchfix-placement-cache" / "tests" / "test_remote_cache_redis.py"
TORCHTITAN = "torchtitan==0.3.0"
# what torchtitan's model, parallelize and optimizer modules import (its trainer's data/logging
# stack, torchdata/tokenizers/datasets/tensorboard/wandb, is not needed: tests/clients/ builds the loop)
TORCHTITAN_DEPS = ["einops", "safetensors", "tyro", "pillow", "spmd_types==0.2.3"]  # + triton: imported by its MoE code
# transformers 5.22.2: the newest release whose GradientCheckpointingLayer checkpoints the layer's
# __call__, FSDP2's hooks inside the checkpoint (so do 4.57.6, 5.0.0, 5.10.4, 5.20.2, 5.21.1; 5.23.0 moved
# the checkpoint to forward, inside the hooks, and no longer reaches fsdp-recompute-cast's bug); it
# declares torch>=2.6 and the job runs on torch 2.8.0-2.15.0. Installed with its (pure-Python) dependencies.
TRANSFORMERS = "transformers==5.22.2"
TRANSFORMERS_TEST = ROOT / "tests" / "clients" / "test_transformers.py"
# besides the default torch (clients): 2.8-2.12 have the bug, 2.14.1/2.15.0 are fixed upstream
CLIENTS_TORCH = ["2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.0", "2.14.1", "2.15.0"]


def _redis_cache(session: nox.Session, torch: str) -> None:
    import shutil

    if shutil.which("redis-server") is None:
        session.skip("no redis-server binary on this machine: install the Debian package redis-server")
    session.install(f"torch=={torch}", *TEST_TOOLS)
    install_torchfix(session, fixtures=False)
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    session.run("python", "-m", "pytest", "-q", "-rs", *session.posargs, str(REDIS_TEST), env=env)


@nox.session
def redis_cache(session: nox.Session) -> None:
    """placement-cache through Inductor's Redis remote caches: 4 rank processes with private local
    caches share one real redis-server (started by the test on a free loopback port), default torch.
    Not tagged ci: the redis client is one of TEST_TOOLS, so the ``tests`` session runs this file."""
    _redis_cache(session, DEFAULT_TORCH)


@nox.session(venv_backend="uv|virtualenv")
@nox.parametrize("torch", [nox.param(v, id=v) for v in ("2.14.1", "2.15.0")])
def redis_cache_torch(session: nox.Session, torch: str) -> None:
    """The Redis remote-cache tests against another torch release (registry builds, through uv)."""
    _redis_cache(session, torch)


@nox.session(python="3.11")
def clients(session: nox.Session) -> None:
    """torchtitan 0.3.0 and transformers 5.22.2 (registry) under torchfix, on the default torch.
    torchtitan: its Llama3 debugmodel with parallelize_llama (SelectiveAC, per-block compile, FSDP2)
    on 2 gloo CPU ranks, torchfix active vs TORCHFIX_DISABLE=all (bit-identical losses, step-time ratio
    printed), and the eager-checkpoint-around-compiled-block ordering (red without torchfix, green with
    it). transformers: a small random Llama with gradient checkpointing and FSDP2 bf16 mixed precision
    (fsdp-recompute-cast; on the default torch, fixed upstream, the bit-identical case); transformers'
    Mamba2 and Bamba with compiled layers and two forwards before one backward (recompute-cache's red
    runs, explained in three forms; TORCHFIX_CORPUS_DIR records them). tests/clients/:
    each job compiles cold in its own cache directory, with one intra-op thread and deterministic
    algorithms. About 10-12 minutes of tests on a 2-core machine, plus the install."""
    session.install(f"torch=={DEFAULT_TORCH}", *TEST_TOOLS, *TORCHTITAN_DEPS, "triton", TRANSFORMERS)
    session.install("--no-deps", TORCHTITAN)
    install_torchfix(session, fixtures=False)
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    session.run("python", "-m", "pytest", "-q", "-s", "-rs", *session.posargs, str(ROOT / "tests" / "clients"), env=env)


@nox.session(python="3.11", venv_backend="uv|virtualenv")
@nox.parametrize("torch", [nox.param(v, id=v) for v in CLIENTS_TORCH])
def clients_torch(session: nox.Session, torch: str) -> None:
    """The transformers job (tests/clients/test_transformers.py) against another torch release (the
    registry's builds, through uv): red without torchfix / green with it where fsdp-recompute-cast
    applies (2.8-2.12), bit-identical on and off where it is not needed; and the explain corpus test
    (tests/clients/test_client_corpus.py: the red runs in three forms are explained as the fix, where
    it applies). torchtitan 0.3.0's job is validated on the default torch only (its glue is for
    2.13). About 4-6 minutes of tests each, plus 5 for the corpus where the bug exists."""
    session.install(f"torch=={torch}", *TEST_TOOLS, TRANSFORMERS)
    install_torchfix(session, fixtures=False)
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    tests = [str(TRANSFORMERS_TEST), str(ROOT / "tests" / "clients" / "test_client_corpus.py")]
    session.run("python", "-m", "pytest", "-q", "-s", "-rs", *session.posargs, *tests, env=env)


CORPUS_TEST = ROOT / "tests" / "clients" / "test_client_corpus.py"
CORPUS_DIR = ROOT / "tests" / "corpus"
# (torch, transformers) of the recorded corpus: releases with the bug, both transformers lines that
# checkpoint the layer's __call__ (4.x and 5.x <= 5.22)
CORPUS_RUNS = [("2.12.0", "5.22.2"), ("2.12.0", "4.57.6"), ("2.10.0", "5.22.2"), ("2.8.0", "5.22.2")]


@nox.session(python="3.11", venv_backend="uv|virtualenv")
@nox.parametrize(("torch", "transformers"), [nox.param(t, tf, id=f"{t}-tf{tf}") for t, tf in CORPUS_RUNS])
def clients_corpus(session: nox.Session, torch: str, transformers: str) -> None:
    """Record the explain corpus from real transformers jobs: fsdp-recompute-cast's red runs of Llama /
    Qwen3 (SDPA, eager, compiled layers) where that bug exists, and sac-replay's (compiled layers under
    transformers' gradient checkpointing, backward on a worker thread; torch >= 2.12) and recompute-cache's
    (Mamba2 / Bamba layers compiled under it, two forwards before one backward; torch 2.10-2.15) and
    fsdp-recompute-unshard's (Llama / Qwen3-MoE, the attention a fully_shard unit nested in each layer's,
    two forwards before one backward; torch 2.8-2.10), in three forms
    (one process, torchrun, error.json), each checked against explain, written with neutral paths into
    tests/corpus/<fix id>/ (tests/test_explain_corpus.py replays it in CI). torchtitan's runs are
    recorded by `nox -s clients` with TORCHFIX_CORPUS_DIR set. About 5 minutes per release on a 2-core
    machine."""
    session.install(f"torch=={torch}", *TEST_TOOLS, f"transformers=={transformers}")
    install_torchfix(session, fixtures=False)
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "TORCHFIX_CORPUS_DIR": str(CORPUS_DIR)}
    session.run("python", "-m", "pytest", "-q", "-rs", *session.posargs, str(CORPUS_TEST), env=env)


# ---------------------------------------------------------------------------------------------------
# MagiCompiler (torchfix-placement-cache's magi-cache-key, torchfix-aot-fallback's magi-aot-fallback),
# tested on Magi's real source. Magi is not on the registry: TORCHFIX_MAGI_SOURCE names what pip installs
# (an archive, a checkout or a git URL); by default the local archive when present, else the pinned
# commit. Installed with --no-deps (its requirements pin triton==3.5.0, which conflicts with torch's)
# plus what it imports; its pyproject says Python >= 3.12, but this commit runs on 3.11.

MAGI_COMMIT = "8e2e47c07996aadfabbd2d6f76731ed1254a7269"
MAGI_ARCHIVE = ROOT.parent / "shared" / "third_party" / "MagiCompiler-8e2e47c.tar.gz"
MAGI_GIT = f"git+https://github.com/SandAI-org/MagiCompiler@{MAGI_COMMIT}"
MAGI_IMPORTS = ["graphviz", "depyf", "pydantic-settings"]


def magi_source() -> str:
    import os

    return os.environ.get("TORCHFIX_MAGI_SOURCE") or (str(MAGI_ARCHIVE) if MAGI_ARCHIVE.is_file() else MAGI_GIT)


MAGI_TORCH = ["2.10.0", "2.11.0", "2.12.0"]  # validated besides the default torch (magi_torch sessions)
MAGI_TEST_PACKAGES = ("torchfix-placement-cache", "torchfix-aot-fallback")


def _magi(session: nox.Session, torch: str) -> None:
    """Install torch, Magi and torchfix; run each package's test_magi_*.py, recorded as the matrix cell
    ``.matrix-results/magi-<torch>/`` (doctor.json from this venv, one JUnit report per package)."""
    session.install(f"torch=={torch}", *TEST_TOOLS, *MAGI_IMPORTS)
    # pip's --ignore-requires-python (uv pip has no such flag): through the venv's own pip, either backend
    session.run("python", "-m", "pip", "install", "-q", "--no-deps", "--ignore-requires-python", magi_source())
    install_torchfix(session, fixtures=False)
    out = start_cell(session, f"magi-{torch}")
    # TORCHFIX_MAGI_SOURCE is this session's own input, not a variable of torchfix: keep it from the tests
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "TORCHFIX_MAGI_SOURCE": None}
    failed = []
    for name in MAGI_TEST_PACKAGES:
        tests = sorted(str(p) for p in (PACKAGES / name / "tests").glob("test_magi_*.py"))
        report = ["--junitxml", str(out / f"{name}.xml")]
        try:
            session.run(
                "python", "-m", "pytest", "-q", "-rs", "-m", "not gpu", *report, *session.posargs, *tests, env=env
            )
        except nox.command.CommandFailed:
            failed.append(name)
    if failed:
        session.error(f"Magi tests failed in: {', '.join(failed)}")


@nox.session(python="3.11", tags=["ci"])
def magi(session: nox.Session) -> None:
    """The Magi adapters on MagiCompiler 8e2e47c and the default torch (CPU, 2 ranks on gloo): red
    without torchfix / green with it for the cache key and the AOT -> JIT fallback, the policy's cases,
    the interplay with the torch-level fixes and the contract; cell .matrix-results/magi-<torch>/.
    About 5 minutes on a 2-core machine (install about 40 s; the two test runs about 140 s and 130 s)."""
    _magi(session, DEFAULT_TORCH)


@nox.session(python="3.11", venv_backend="uv|virtualenv")
@nox.parametrize("torch", [nox.param(v, id=v) for v in MAGI_TORCH])
def magi_torch(session: nox.Session, torch: str) -> None:
    """The Magi tests against another torch release (the registry's CUDA builds, run on the CPU, through
    uv); cell .matrix-results/magi-<torch>/. Opt-in: not in the ci tag."""
    _magi(session, torch)
