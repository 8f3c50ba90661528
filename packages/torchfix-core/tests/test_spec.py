"""torchfix_core.spec helpers that fix packages use at import time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from torchfix_core.spec import lazy_version


def test_lazy_version_reads_version_module_only_when_asked(tmp_path: Path) -> None:
    """A package whose ``__init__`` uses ``lazy_version`` imports its ``version`` module on the first
    ``__version__`` lookup, not before; other missing names raise AttributeError naming the package."""
    pkg = tmp_path / "lazy_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from torchfix_core.spec import lazy_version\n__getattr__ = lazy_version(__name__)\n"
    )
    (pkg / "version.py").write_text('__version__ = "1.2.3"\n')
    code = textwrap.dedent(
        """
        import sys
        import lazy_pkg
        print("lazy_pkg.version" in sys.modules)
        print(lazy_pkg.__version__)
        print("lazy_pkg.version" in sys.modules)
        try:
            lazy_pkg.missing
        except AttributeError as error:
            print(error)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[:4] == ["False", "1.2.3", "True", "module 'lazy_pkg' has no attribute 'missing'"]


def test_lazy_version_getattr_rejects_other_names() -> None:
    getattr_ = lazy_version("no_such_package_here")
    with pytest.raises(AttributeError, match="no_such_package_here.*'other'"):
        getattr_("other")
