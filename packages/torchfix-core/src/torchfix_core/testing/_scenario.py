"""Scenario scripts in fresh interpreters: the environment they start from and the JSON they report.

A fix's tests, demos and benchmarks run their reproductions in a fresh interpreter, so that the
fix's activation at ``import torch`` is the one a user gets. Every such script prints one JSON
object as its last line of standard output; :func:`run_json_script` runs it and returns that
object. :func:`clean_environ` is the environment it starts from: this process's, less every
``TORCHFIX_*`` variable (a developer's own switches must not leak into a reproduction), plus the
variables the caller names. :func:`only_fix` names the variables that leave one fix alone on or off,
:func:`fix_switch` the one that turns a fix on or off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

#: A stderr tail longer than this is cut from the front in a failure message.
STDERR_TAIL = 6000
#: how the reproduction's interpreter names itself in ``sys.argv[0]`` (``python -m torchfix_core.reproduction``)
REPRODUCTION_MAIN = os.path.join("torchfix_core", "reproduction.py")


class ScenarioFailed(AssertionError):
    """A scenario script exited non-zero, or printed no JSON line (a test failure, not an error)."""


def clean_environ(variables: Mapping[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` without any ``TORCHFIX_*`` variable, with ``TORCHINDUCTOR_COMPILE_THREADS=1``
    unless it is set (one compile worker: a 2-core CI machine stays responsive), then ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env.update(variables or {})
    return env


def fix_switch(fix_id: str, enabled: bool) -> dict[str, str]:
    """The variable that turns ``fix_id`` on or off whatever ``TORCHFIX_DISABLE`` says
    (``TORCHFIX_<ID>_ENABLED``)."""
    from torchfix_core._env import env_key

    return {env_key(fix_id): "1" if enabled else "0"}


def only_fix(fix_id: str, enabled: bool) -> dict[str, str]:
    """The variables that switch every installed fix off but ``fix_id``, which is on or off as
    ``enabled`` says (``TORCHFIX_DISABLE=all`` and :func:`fix_switch`)."""
    return {"TORCHFIX_DISABLE": "all", **fix_switch(fix_id, enabled)}


def run_json_script(
    argv: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    python: str | os.PathLike[str] | None = None,
    timeout: float = 600,
) -> dict[str, Any]:
    """Run ``python *argv`` (a script and its arguments, or ``-c`` and code) in
    :func:`clean_environ` plus ``env``; return the JSON object its last stdout line holds.

    Raises :class:`ScenarioFailed` with the exit status and the output's tail when the interpreter
    exits non-zero or prints nothing, and ``subprocess.TimeoutExpired`` past ``timeout`` seconds."""
    command = [str(python or sys.executable), *map(str, argv)]
    proc = subprocess.run(command, env=clean_environ(env), capture_output=True, text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise ScenarioFailed(
            f"{' '.join(command[1:])[:300]} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n"
            f"{proc.stderr[-STDERR_TAIL:]}"
        )
    result = json.loads(lines[-1])
    if not isinstance(result, dict):
        raise ScenarioFailed(f"{' '.join(command[1:])[:300]} printed {lines[-1][:200]!r}, not a JSON object")
    return result


def reproduce(
    fix_id: str,
    enabled: bool,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    with_report: bool = False,
) -> dict[str, Any]:
    """Run ``fix_id``'s declared reproduction (``FixSpec.reproduction``) once, in a fresh
    interpreter with every fix off but ``fix_id`` (on or off: :func:`only_fix`), plus ``env``: what
    ``torchfix-doctor verify`` runs. Returns the child's record: ``outcome`` (``result``,
    ``measure``, ``detail``), the fix's state there, ``seconds``; with ``with_report``, also
    ``report``: the fix's row of the report the child wrote at exit (``TORCHFIX_REPORT`` in a
    temporary directory: ``state``, ``acted``, ``events``). A reproduction that broke raises
    :class:`ScenarioFailed` with its error."""
    argv = ["-m", "torchfix_core.reproduction", fix_id]
    if not with_report:
        return run_json_script(argv, env={**only_fix(fix_id, enabled), **(env or {})}, timeout=timeout)
    import tempfile

    from torchfix_core._report import FILE_GLOB

    with tempfile.TemporaryDirectory(prefix=f"torchfix-{fix_id}-report-") as folder:
        options = {**only_fix(fix_id, enabled), **(env or {}), "TORCHFIX_REPORT": folder}
        record = run_json_script(argv, env=options, timeout=timeout)
        reports = [json.loads(p.read_text()) for p in sorted(Path(folder).glob(FILE_GLOB))]
        # the reproduction's own report: processes it started that import torch write theirs too
        # (Inductor's compile workers on torch 2.8, a spawned rank), each with its own argv
        own = [r for r in reports if str((r.get("argv") or [""])[0]).endswith(REPRODUCTION_MAIN)]
        if len(own) != 1:
            starts = [(r.get("argv") or ["?"])[0] for r in reports]
            raise AssertionError(f"expected one report of {REPRODUCTION_MAIN}, found {len(own)} among {starts}")
        rows = own[0]["fixes"]
    record["report"] = next(r for r in rows if r["id"] == fix_id)
    return record


def run_json_script_timed(argv: Sequence[str | os.PathLike[str]], **options: Any) -> dict[str, Any]:
    """:func:`run_json_script` (same keyword options) for a demo, which reports instead of raising:
    the object gains ``seconds`` (wall time); a failed run gives ``{"ok": False, "error": ...}``."""
    start = time.perf_counter()
    try:
        result = run_json_script(argv, **options)
    except (ScenarioFailed, subprocess.TimeoutExpired) as exc:
        result = {"ok": False, "error": f"scenario crashed: {str(exc)[-800:]}"}
    result["seconds"] = time.perf_counter() - start
    return result


def scenario_main(scenarios: Mapping[str, Callable[..., dict[str, Any]]], argv: Sequence[str]) -> None:
    """A scenario script's ``main``: run ``scenarios[argv[0]](*argv[1:])`` and print its result as one
    JSON line with ``"ok": true``, or, where it raised, ``"ok": false`` with ``error_type``,
    ``error`` and ``traceback`` (what :func:`describe_failure` and the signature tests read)."""
    import traceback

    try:
        result: dict[str, Any] = {"ok": True, **scenarios[argv[0]](*argv[1:])}
    except Exception as exc:  # noqa: BLE001 - reported to the test as JSON
        result = {"ok": False, "error_type": type(exc).__name__, "error": str(exc), "traceback": traceback.format_exc()}
    print(json.dumps(result))


def describe_failure(result: Mapping[str, Any], width: int = 100) -> str:
    """``ErrorType: first line of the message`` of a failed scenario result (its ``error_type`` and
    ``error`` fields; ``builtins.`` and module prefixes dropped), cut to ``width`` characters."""
    first = (str(result.get("error", "")).splitlines() or [""])[0]
    kind = str(result.get("error_type", "error")).rsplit(".", 1)[-1]
    return f"{kind}: {first[:width]}"


def demo_reproduction(fix_id: str, enabled: bool, timeout: float = 600) -> dict[str, Any]:
    """For a demo: fix ``fix_id``'s declared reproduction in a fresh interpreter, that fix alone on or
    off (what ``torchfix-doctor verify`` runs), timed (:func:`run_json_script_timed`). The record has
    ``ok`` (True where an outcome came back) and, where the reproduction broke, ``error``."""
    record = run_json_script_timed(
        ["-m", "torchfix_core.reproduction", fix_id], env=only_fix(fix_id, enabled), timeout=timeout
    )
    record["ok"] = "outcome" in record
    record.setdefault("error", record.get("broke", ""))
    return record


def demo_line(label: str, describe: Callable[[Mapping[str, Any]], str], result: Mapping[str, Any]) -> str:
    """One line of a demo's output for a scenario result: ``label`` padded to 18 characters, then
    ``describe(result)`` where the scenario ran (``result["ok"]``), else :func:`describe_failure`
    (so a failed scenario is shown by its error, never by fields it may lack)."""
    body = describe(result) if result.get("ok") else describe_failure(result, 100)
    return f"  {label:<18} {body}"


def print_recorded_gpu_run(
    log: Path, describe: Callable[[str, dict[str, Any]], str], *, machine: str = "a CUDA GPU"
) -> None:
    """For a demo on a machine without a GPU: print what a recorded GPU test run showed.

    ``log`` is the raw output of ``pytest -m gpu -s -rA`` on a fix's ``test_gpu.py`` whose
    scenarios print ``gpu scenario, fix on: {json}`` / ``fix off``; its first line (the versions)
    is printed (it names the device: an H100 or an H200 log alike), then ``describe(label, result)`` for each scenario line (``label`` is ``fix on`` or
    ``fix off``) and each test's PASSED / FAILED line. A missing log is said, not raised."""
    print(f"  no CUDA GPU here; recorded on {machine} ({log.name}):")
    if not log.is_file():
        print("  (log not in this checkout)")
        return
    lines = log.read_text().splitlines()
    print(f"    {lines[0]}")
    for line in lines:
        if line.startswith("gpu scenario, fix "):
            head, _, data = line.partition(": ")
            print(f"    {describe(head[len('gpu scenario, ') :], json.loads(data))}")
        elif line.startswith(("PASSED ", "FAILED ")):
            print(f"    {line.split('::')[-1]}: {line.split()[0]}")


@dataclass(frozen=True)
class DemoCheck:
    """One check of a GPU fix's demo: ``intro`` (printed first), ``run(fix)`` (the scenario in a
    fresh interpreter, the fix on or off; a failed run is a result, not an exception) and
    ``figures(result)`` (what a successful result shows, one line)."""

    intro: str
    run: Callable[[bool], Mapping[str, Any]]
    figures: Callable[[Mapping[str, Any]], str]

    def print_without_and_with(self) -> None:
        print(f"  {self.intro}")
        for label, fix in (("without the fix:", False), ("with the fix:", True)):
            print(demo_line(label, self.figures, self.run(fix)))


def print_gpu_fix_demo(
    title: str,
    *,
    gpu: DemoCheck,
    recorded: tuple[Path, Callable[[str, dict[str, Any]], str]],
    cpu: DemoCheck,
) -> None:
    """The demo section of a fix whose bug shows on a GPU: ``title``, then with a CUDA GPU the
    ``gpu`` check without and with the fix; without one, the recorded GPU run (``recorded``: the
    log and the line formatter for :func:`print_recorded_gpu_run`) and the ``cpu`` check of what
    the fix changes. Imports torch (to ask for a GPU) when called, not at import."""
    import torch

    print(f"== {title} ==")
    if torch.cuda.is_available():
        gpu.print_without_and_with()
        return
    print_recorded_gpu_run(*recorded)
    cpu.print_without_and_with()
