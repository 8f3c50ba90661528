"""``torchfix-run [--] CMD ...``: run a command with torchfix activated in every Python child.

Puts a ``sitecustomize`` on ``PYTHONPATH`` that imports :mod:`torchfix_core.auto`, so activation
happens even when torch's backend autoload is off, in the command itself and in every process it
starts (``torchrun`` ranks, spawn workers, compile subprocesses). The exit status is the command's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def child_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if environ is None else environ)
    bootstrap = str(Path(__file__).with_name("_bootstrap"))
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != bootstrap]
    env["PYTHONPATH"] = os.pathsep.join([bootstrap, *parts])
    env["TORCHFIX_ACTIVATION_SOURCE"] = "torchfix-run"
    return env


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--":
        args = args[1:]
    if not args or args[0] in ("-h", "--help"):
        sys.stderr.write("usage: torchfix-run [--] COMMAND [ARGS...]\n")
        return 2
    env = child_environment()
    try:
        os.execvpe(args[0], args, env)
    except OSError as exc:
        sys.stderr.write(f"torchfix-run: cannot run {args[0]!r}: {exc}\n")
        return 127
    return 0  # pragma: no cover - execvpe does not return


if __name__ == "__main__":
    raise SystemExit(main())
