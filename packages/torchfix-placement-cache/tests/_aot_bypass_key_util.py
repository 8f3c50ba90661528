"""Subprocess runner of the aot-bypass-key tests (a test harness, not shipped in the wheel).

The red/green case (one Dynamo capture of three unkeyable graphs, pytorch#194451) is the shipped
scenario ``one_capture`` of ``torchfix_placement_cache.reproduction`` (:func:`run_scenario`), the
declared reproduction's; the other cases are the code snippets below (:func:`run`). Each scenario runs in a fresh interpreter with a private ``TORCHINDUCTOR_CACHE_DIR`` (unless the
test shares one on purpose), so "without the fix" (``TORCHFIX_DISABLE=aot-bypass-key``) sees torch's
own ``autograd_cache_key`` and "with the fix" sees the state torchfix reaches at ``import torch``.
The graphs are unkeyable on every release: they call ``opaque``, a plain Python function let into
the graph with ``torch._dynamo.allow_in_graph`` (not on AOTAutograd's allowlist).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from torchfix_core.testing import clean_environ, run_json_script

FIX_ID = "aot-bypass-key"
#: the shipped scenarios (``python -m`` it)
SCENARIOS = "torchfix_placement_cache.reproduction"

PRELUDE = """
import json, random
import torch, torch._dynamo
import torch._functorch._aot_autograd.autograd_cache as ac
from torch._dynamo.utils import counters

if hasattr(torch._dynamo.config, "enable_aot_compile"):  # absent on 2.8
    torch._dynamo.config.enable_aot_compile = True  # aot_compile() needs it on 2.10/2.11 (default on 2.12+)
#: the switch the fallback reads on the frame-evaluation path: 2.11+ functorch flag; 2.10 enable_aot_compile
BYPASS = {"bypass_autograd_cache_key": True} if hasattr(torch._functorch.config, "bypass_autograd_cache_key") else {}

@torch._dynamo.allow_in_graph
def opaque(x):
    return x * 2

KEYS = []
_key = ac.autograd_cache_key
def _spy(*args, **kwargs):
    out = _key(*args, **kwargs)
    KEYS.append(out[0])
    return out
ac.autograd_cache_key = _spy  # records the keys try_load computes (module attribute: try_load's binding)

def aot():
    return {k: int(v) for k, v in counters["aot_autograd"].items() if k.startswith("autograd_cache")}

def fix_state():
    import torchfix_core
    return next(str(r.state) for r in torchfix_core.status() if r.id == "aot-bypass-key")

def emit(**kw):
    from torchfix_core.testing import report_of
    print("RESULT " + json.dumps({**kw, "report": report_of("aot-bypass-key")}))
"""


def run(code: str, cache_dir: Path, *, fix: bool, timeout: float = 600) -> dict[str, Any]:
    """Run ``PRELUDE + code`` in a fresh interpreter; returns its ``emit(...)`` dict (+ ``rc``, ``stderr``)."""
    env = clean_environ({"TORCHINDUCTOR_COMPILE_THREADS": "1", "TORCHINDUCTOR_CACHE_DIR": str(cache_dir)})
    if not fix:
        env["TORCHFIX_DISABLE"] = FIX_ID
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    result: dict[str, Any] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
    result["rc"] = proc.returncode
    result["stderr"] = proc.stderr[-4000:]
    assert proc.returncode == 0 and "rc" in result and len(result) > 2, result
    return result


def run_scenario(name: str, cache_dir: Path, *, fix: bool, timeout: float = 600) -> dict[str, Any]:
    """The shipped scenario ``name`` in a fresh interpreter, caching under ``cache_dir``, the fix as
    torchfix's default with ``fix``, else ``TORCHFIX_DISABLE=aot-bypass-key``."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache_dir), **({} if fix else {"TORCHFIX_DISABLE": FIX_ID})}
    return run_json_script(["-m", SCENARIOS, name], env=env, timeout=timeout)


KEY_LEVEL = """
from torchfix_placement_cache.bypass_key import unkeyable_graph
gm = unkeyable_graph()
keys, dirs = [], []
try:
    with torch._functorch.config.patch(BYPASS):
        for _ in range(2):
            random.seed(0)  # upstream's test: reset the Python seed before each key generation
            key, _lines = _key(gm, [], None, None)
            keys.append(key)
            dirs.append(ac.AOTAutogradCache._get_tmp_dir_for_key(key))
except ac.BypassAOTAutogradCache as exc:  # 2.8/2.9: no fallback key, the graph bypasses the cache
    keys, dirs = None, str(exc).splitlines()[0]
emit(keys=keys, dirs=dirs, state=fix_state())
"""


#: the user-visible failure: two AOT compiles from one Python random state (every rank seeded alike,
#: or one process that reseeds); without the fix ``g`` loads ``f``'s artifact
SEEDED = """
def f(x):
    return opaque(x) + 1

def g(x):
    return opaque(x) - 100

x = torch.ones(4)
random.seed(0)
cf = torch.compile(f, fullgraph=True).aot_compile(((x,), {}))
random.seed(0)  # a seeded run: every rank, or every restart, starts from this state
cg = torch.compile(g, fullgraph=True).aot_compile(((x,), {}))
next_draw = random.random()
random.seed(0)
emit(keys=KEYS, aot=aot(), f_ok=bool(torch.equal(cf(x), f(x))), g_ok=bool(torch.equal(cg(x), g(x))),
     g_out=cg(x).tolist(), rng_untouched=next_draw == random.random(), state=fix_state())
"""


@functools.cache
def _own_fallback_keys() -> list[str] | None:
    """Torch's own two fallback keys for one unkeyable graph from one Python random state, measured
    in a fresh interpreter with the fix disabled; None where torch has no fallback key (2.8/2.9: the
    graph bypasses the cache)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        keys = run(KEY_LEVEL, Path(tmp), fix=False)["keys"]
    return None if keys is None else list(keys)


def has_fallback_key() -> bool:
    """Torch keys an unkeyable graph with a fallback nonce at all (2.10+); independent of the fix's probe."""
    return _own_fallback_keys() is not None


def bug_present() -> bool:
    """Torch's own fallback key repeats from one Python random state (2.10-2.14), measured in a
    fresh interpreter with the fix disabled; independent of the fix's probe."""
    keys = _own_fallback_keys()
    return keys is not None and keys[0] == keys[1]


def expected_state() -> str:
    """``applied`` where the key repeats, ``not-needed`` where it is already unique (2.15)."""
    from torchfix_core.testing import state_to_expect

    return state_to_expect(FIX_ID, bug_present())
