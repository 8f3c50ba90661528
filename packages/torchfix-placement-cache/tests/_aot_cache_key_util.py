"""Runner of the aot-autocast-key and aot-hop-body-key tests (a test harness, not shipped in the wheel).

Every scenario of ``torchfix_placement_cache.reproduction`` (shipped in the wheel with the declared
reproductions) runs in a fresh interpreter through the kit
(``run_json_script``) with one fix alone on or off (``only_fix``) and a private
``TORCHINDUCTOR_CACHE_DIR`` (shared on purpose by the two processes of a cross-process test).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

from torchfix_core.testing import only_fix, run_json_script, state_to_expect

#: the scenarios, shipped in the wheel with the declared reproductions (``python -m`` it)
SCENARIOS = "torchfix_placement_cache.reproduction"
AUTOCAST = "aot-autocast-key"
HOP_BODY = "aot-hop-body-key"


def run(fix_id: str, fix: bool, cache_dir: Path, scenario: str, arg: str = "", **env: str) -> dict[str, Any]:
    """Run one scenario with only ``fix_id`` on (``fix``) or off, caching under ``cache_dir``."""
    variables = {**only_fix(fix_id, fix), "TORCHINDUCTOR_CACHE_DIR": str(cache_dir), **env}
    return run_json_script(["-m", SCENARIOS, scenario, arg], env=variables, timeout=900)


@functools.cache
def autocast_bug_present() -> bool:
    """torch's own key is equal under bfloat16 and float16 autocast (2.8-2.12), measured in a fresh
    interpreter with the fix off; independent of the fix's probe."""
    with tempfile.TemporaryDirectory() as tmp:
        keys = run(AUTOCAST, False, Path(tmp), "autocast_keys")["keys"]
    return bool(keys["bfloat16"] == keys["float16"])


@functools.cache
def hop_bug_present() -> bool:
    """torch's ``check_cacheable`` accepts a root whose nested body calls a plain function (fix off)."""
    with tempfile.TemporaryDirectory() as tmp:
        return not run(HOP_BODY, False, Path(tmp), "nested_check")["root_bypasses"]


def expected_state(fix_id: str) -> str:
    """``applied`` where the bug is present, ``not-needed`` where torch fixed it, ``out-of-range`` outside targets."""
    present = autocast_bug_present() if fix_id == AUTOCAST else hop_bug_present()
    return state_to_expect(fix_id, present)
