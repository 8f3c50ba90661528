"""Product files are product code: nothing in them points to one developer's machine or tools, and
the wheels ship no test harness (see also the build checks of ``nox -s build``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("packages", "docs", "scripts", "benchmarks", "README.md")
#: what a path of one machine or of this repository's development setup looks like
LOCAL = re.compile(
    r"(\.\./shared/|/work/|/root/|/opt/|/home/\w|/tmp/tf\b|\$HOME/gw|\.gpuwheels|gpu-torch-wheels|gpu-te-wheels|ci-local|"
    r"^rootdir: /)",
    re.M,
)


def tracked(*paths: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--", *paths], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in out.stdout.splitlines() if line]


def test_product_files_name_no_local_path_or_workplace_tool() -> None:
    hits = []
    for path in tracked(*PRODUCT):
        if not path.is_file():  # deleted in the working tree
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        hits += [
            f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
            for m in LOCAL.finditer(text)
        ]
    assert hits == [], "\n".join(hits)


def test_no_test_harness_inside_a_package_source_tree() -> None:
    """``src/`` holds what the wheel ships: no tests, conftest or multi-process test harness."""
    harness = re.compile(r"(^|/)(tests?|conftest\.py|test_[^/]*\.py|_multirank\.py)$")
    bad = [str(p.relative_to(ROOT)) for p in tracked("packages") if "/src/" in str(p) and harness.search(str(p))]
    assert bad == [], bad
