"""Compare the installed torch with another release's files: is a patch release a twin of its base?

    python scripts/release_twin.py --base DIR --out FILE

``DIR`` holds the base release's wheel unpacked without dependencies (``pip install --no-deps
--target DIR torch==2.12.0``: ``DIR/torch/`` and its ``torch-<version>.dist-info``); the release
compared is the torch of the running interpreter, found without importing it. ``FILE`` receives a
JSON record (``nox -s "twin(<release>)"`` writes it as ``twin.json`` in the cell folder, and
scripts/compatibility.py renders and checks it):

* ``release`` / ``base``: the two versions, from their distribution metadata;
* ``python_files``: how many ``.py`` files the two ``torch/`` trees hold together;
  ``python_differing``: those whose bytes differ or that only one tree holds, by path below ``torch/``;
* ``other_differing``: the same for every other file (compiled libraries, headers, stubs), which no
  fix patches or probes as source;
* ``requirements_changed``: ``[base requirement, release requirement]`` for each requirement of the
  two wheels that differs (e.g. a Triton pin), ``null`` where one wheel lacks it;
* ``twin``: true when no Python file differs but ``version.py``: every patch point, probe and
  reproduction-visible line of Python is then the base's, and the base's matrix column stands for the
  release. It says nothing about compiled code; scripts/compatibility.py also compares each fix's
  decision (the doctor's report of this environment against the base's recorded cell).

``__pycache__`` folders are skipped (their bytecode follows the sources and the installer).
"""

from __future__ import annotations

import argparse
import email.parser
import importlib.metadata
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

#: the one Python file a patch release always changes (its version and commit)
VERSION_FILE = "version.py"
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def tree_files(root: Path) -> dict[str, Path]:
    """Every file below ``root`` by its ``/``-separated path relative to it, ``__pycache__`` skipped."""
    return {
        path.relative_to(root).as_posix(): path
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.relative_to(root).parts
    }


def same_bytes(left: Path, right: Path) -> bool:
    """Whether two files hold the same bytes (sizes first, then 1 MiB blocks)."""
    if left.stat().st_size != right.stat().st_size:
        return False
    with left.open("rb") as a, right.open("rb") as b:
        while True:
            block = a.read(1 << 20)
            if block != b.read(1 << 20):
                return False
            if not block:
                return True


def compare_trees(base: Path, release: Path) -> dict[str, Any]:
    """The file comparison of two ``torch/`` trees (the ``python_*`` and ``other_*`` keys and ``twin``
    of the module docstring)."""
    base_files, release_files = tree_files(base), tree_files(release)
    differing = sorted(
        path
        for path in base_files.keys() | release_files.keys()
        if path not in base_files or path not in release_files or not same_bytes(base_files[path], release_files[path])
    )
    python = [path for path in differing if path.endswith(".py")]
    return {
        "python_files": sum(1 for path in base_files.keys() | release_files.keys() if path.endswith(".py")),
        "python_differing": python,
        "other_differing": [path for path in differing if not path.endswith(".py")],
        "twin": set(python) <= {VERSION_FILE},
    }


def requirements(metadata_text: str) -> dict[str, str]:
    """A wheel's ``Requires-Dist`` lines by requirement name (lower case, ``-`` for ``_``)."""
    message = email.parser.Parser().parsestr(metadata_text)
    found: dict[str, str] = {}
    for line in message.get_all("Requires-Dist") or []:
        match = _REQUIREMENT_NAME.match(line)
        if match:
            found[match.group(1).lower().replace("_", "-")] = line.strip()
    return found


def changed_requirements(base: dict[str, str], release: dict[str, str]) -> list[list[str | None]]:
    """``[base line, release line]`` for each requirement that differs, by name."""
    return [
        [base.get(name), release.get(name)]
        for name in sorted(base.keys() | release.keys())
        if base.get(name) != release.get(name)
    ]


def base_distribution(base_dir: Path) -> tuple[str, str]:
    """The version and ``METADATA`` text of the torch wheel unpacked in ``base_dir``."""
    infos = sorted(base_dir.glob("torch-*.dist-info"))
    if len(infos) != 1 or not (infos[0] / "METADATA").is_file():
        raise SystemExit(f"{base_dir}: expected one torch-*.dist-info with METADATA, found {[p.name for p in infos]}")
    text = (infos[0] / "METADATA").read_text(encoding="utf-8")
    return str(email.parser.Parser().parsestr(text)["Version"]), text


def installed_torch() -> tuple[Path, str, str]:
    """The running interpreter's ``torch/`` folder, version and ``METADATA`` text (torch not imported)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise SystemExit("torch is not installed in this interpreter")
    distribution = importlib.metadata.distribution("torch")
    return Path(spec.origin).parent, distribution.version, distribution.read_text("METADATA") or ""


def compare(base_dir: Path) -> dict[str, Any]:
    """The record of the module docstring: the installed torch against the one in ``base_dir``."""
    if not (base_dir / "torch").is_dir():
        raise SystemExit(f"{base_dir}: no torch/ folder (install the base with --no-deps --target {base_dir})")
    base_version, base_metadata = base_distribution(base_dir)
    tree, version, metadata = installed_torch()
    return {
        "release": version,
        "base": base_version,
        **compare_trees(base_dir / "torch", tree),
        "requirements_changed": changed_requirements(requirements(base_metadata), requirements(metadata)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the base release unpacked with --no-deps --target")
    parser.add_argument("--out", type=Path, required=True, help="where the JSON record goes")
    args = parser.parse_args(argv)
    record = compare(args.base)
    args.out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    verdict = "a twin" if record["twin"] else "NOT a twin"
    print(
        f"torch {record['release']} against {record['base']}: {verdict}; {len(record['python_differing'])} of "
        f"{record['python_files']} Python files differ ({', '.join(record['python_differing']) or 'none'}), "
        f"{len(record['other_differing'])} other files, {len(record['requirements_changed'])} requirements"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
