"""torchfix's part of TransformerEngine's own GPU tests (``third_party/transformer_engine/``).

The test files there hold TE's test code, unchanged; what torchfix adds to them comes from here, so
that TE's text stays TE's:

* :data:`GPU_MARKS`, the ``gpu`` marker (``-m gpu`` selects them; ``nox -s te`` runs ``-m "not gpu"``);
* :func:`require_cuda_and_te`, called before a file imports TE: on a machine without CUDA or
  without a TransformerEngine build the whole file is skipped (one skip, no collection error);
* the check that a fix's state is the one the running TE release calls for, one test a fix
  (``applied`` before the upstream fix, ``not-needed`` from it on, ``disabled`` under
  ``TORCHFIX_DISABLE``, ``out-of-range`` below the fix's validated range); each file imports the
  test of the fix its TE tests are about, and pytest collects it there.
"""

from __future__ import annotations

import os

import pytest
import torch

GPU_MARKS = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

#: fix id -> (first TE release of its validated range, None: every release the tests meet;
#: first TE release with the upstream fix). fp8-recompute: TE PR #3284 (TE 2.19.0);
#: fp8-recompute-pairing: TE PR #3394 (TE 2.20.2), validated from TE 2.18.
TE_RELEASES: dict[str, tuple[str | None, str]] = {
    "fp8-recompute": (None, "2.19"),
    "fp8-recompute-pairing": ("2.18", "2.20"),
}


def require_cuda_and_te() -> None:
    """Skip the calling test module, at its import, unless CUDA and ``transformer_engine.pytorch``
    are there (call it before the module imports TE)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU", allow_module_level=True)
    pytest.importorskip("transformer_engine.pytorch", reason="needs a TransformerEngine build")


def expected_fix_state(fix_id: str, te_version: str, disable: str) -> str:
    """The state ``fix_id`` must report on TE ``te_version`` under ``TORCHFIX_DISABLE=disable``."""
    from packaging.version import Version

    first, fixed_in = TE_RELEASES[fix_id]
    version = Version(Version(te_version).base_version)
    if disable == "all" or fix_id in disable.split(","):
        return "disabled"
    if version >= Version(fixed_in):
        return "not-needed"
    if first is None or version >= Version(first):
        return "applied"
    return "out-of-range"


def assert_fix_state_matches_te_release(fix_id: str) -> None:
    import torchfix_core
    from transformer_engine import __version__ as te_version

    raw = next(r.state for r in torchfix_core.status() if r.id == fix_id)
    state = str(getattr(raw, "value", raw))
    expected = expected_fix_state(fix_id, te_version, os.environ.get("TORCHFIX_DISABLE", ""))
    assert state == expected, (te_version, state)


def test_fp8_recompute_fix_state_matches_te_release() -> None:
    assert_fix_state_matches_te_release("fp8-recompute")


def test_fp8_recompute_pairing_fix_state_matches_te_release() -> None:
    assert_fix_state_matches_te_release("fp8-recompute-pairing")
