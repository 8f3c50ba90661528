"""The contract cases, run one per fresh interpreter: ``python -m torchfix_core.testing._cases CONFIG``.

Each case exits 0 and prints a JSON line on success; any failed check raises AssertionError
(non-zero exit, traceback on stderr). Cases drive only the fix under test (``only=[fix_id]``).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any, Callable

_MISSING = object()


def _resolve(module_name: str, path: str) -> Any:
    """The raw object at ``module.path`` (class attributes through ``__dict__``)."""
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 - a missing target is reported as missing
        return _MISSING
    parts = path.split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part, _MISSING)
        if obj is _MISSING:
            return _MISSING
    last = parts[-1]
    if isinstance(obj, type):
        return obj.__dict__.get(last, _MISSING)
    return getattr(obj, last, _MISSING)


class Case:
    def __init__(self, config: dict[str, Any]) -> None:
        self.fix_id: str = config["fix_id"]
        self.patched: list[tuple[str, str]] = [tuple(p) for p in config["patched"]]  # type: ignore[misc]
        self.expected: str = config["expected"]
        self.log: dict[str, Any] = {"case": config["case"], "fix": self.fix_id}

    # -- helpers ---------------------------------------------------------------------------------
    def tfc(self) -> Any:
        import torchfix_core

        return torchfix_core

    def state(self) -> str:
        for row in self.tfc().status():
            if row.id == self.fix_id:
                return str(row.state)
        raise AssertionError(f"{self.fix_id!r} is not in status(): is its distribution installed?")

    def reason(self) -> str:
        return next(str(r.reason) for r in self.tfc().status() if r.id == self.fix_id)

    def expect_state(self, wanted: str, when: str) -> None:
        got = self.state()
        assert got == wanted, f"{when}: state {got!r}, expected {wanted!r} (reason: {self.reason()})"

    def import_triggers(self) -> None:
        from torchfix_core.testing._introspect import import_triggers

        import_triggers(self.fix_id)

    def snapshot(self) -> list[Any]:
        return [_resolve(m, p) for m, p in self.patched]

    def expect_original(self, originals: list[Any], when: str) -> None:
        for (m, p), before, now in zip(self.patched, originals, self.snapshot()):
            assert now is before, f"{when}: {m}.{p} is {now!r}, expected the original object {before!r}"

    def expect_patched(self, originals: list[Any], when: str) -> list[Any]:
        now = self.snapshot()
        if self.expected != "applied":
            self.expect_original(originals, when)
            return now
        for (m, p), before, cur in zip(self.patched, originals, now):
            assert before is not _MISSING, f"{m}.{p} does not exist on this version"
            assert cur is not before, f"{when}: {m}.{p} is still the original object"
        return now

    def impl_class(self) -> Any:
        from torchfix_core.testing._introspect import fix_spec

        module_name, _, attr = fix_spec(self.fix_id).implementation.partition(":")
        return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]

    def originals_after_import(self) -> list[Any]:
        import torch  # noqa: F401

        self.import_triggers()
        return self.snapshot()

    # -- cases -----------------------------------------------------------------------------------
    def activated_at_import_torch(self) -> None:
        # autoload on: import torch activates and leaves the fix pending until its triggers are
        # imported, having imported no compiler module and not the fix's implementation;
        # importing the triggers applies.
        import torch  # noqa: F401

        from torchfix_core.testing._introspect import fix_spec

        spec = fix_spec(self.fix_id)
        if not all(name in sys.modules for name in spec.triggers):
            self.expect_state("pending", "after import torch, before the triggers are imported")
            heavy = [m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules]
            assert not heavy, f"import torch with torchfix activated imported {heavy}"
            implementation = spec.implementation.partition(":")[0]
            assert implementation not in sys.modules, f"import torch imported the implementation {implementation}"
        self.import_triggers()
        self.expect_state(self.expected, "after import torch + triggers")
        source = self.tfc().activation().source
        assert source in ("torch.backends", "torchfix_core.auto", "torchfix-run"), f"activation source {source!r}"

    def import_then_apply(self) -> None:
        originals = self.originals_after_import()
        self.tfc().apply(only=[self.fix_id])
        self.expect_state(self.expected, "after apply")
        self.expect_patched(originals, "after apply")

    def apply_then_import(self) -> None:
        import torch  # noqa: F401

        from torchfix_core.testing._introspect import fix_spec

        triggers = fix_spec(self.fix_id).triggers
        already = all(name in sys.modules for name in triggers)
        self.tfc().apply(only=[self.fix_id])
        if not already:
            self.expect_state("pending", "after apply, before the triggers are imported")
        self.import_triggers()
        self.expect_state(self.expected, "after importing the triggers")
        self.log["triggers_were_imported"] = already

    def apply_twice(self) -> None:
        originals = self.originals_after_import()
        self.tfc().apply(only=[self.fix_id])
        first = self.expect_patched(originals, "after the first apply")
        self.tfc().apply(only=[self.fix_id])
        self.expect_state(self.expected, "after the second apply")
        for (m, p), a, b in zip(self.patched, first, self.snapshot()):
            assert a is b, f"second apply replaced {m}.{p} again"

    def apply_revert_apply(self) -> None:
        originals = self.originals_after_import()
        for round_ in (1, 2):
            self.tfc().apply(only=[self.fix_id])
            self.expect_state(self.expected, f"apply #{round_}")
            self.expect_patched(originals, f"apply #{round_}")
            self.tfc().revert(only=[self.fix_id])
            self.expect_original(originals, f"revert #{round_}")
            self.expect_state("disabled", f"revert #{round_}")

    def revert_first(self) -> None:
        originals = self.originals_after_import()
        self.tfc().revert(only=[self.fix_id])
        self.expect_original(originals, "after a revert with nothing applied")
        self.tfc().apply(only=[self.fix_id])
        self.expect_state(self.expected, "apply after revert")

    def disabled_by_env(self) -> None:
        assert os.environ.get("TORCHFIX_DISABLE") == self.fix_id
        originals = self.originals_after_import()
        self.tfc().apply(only=[self.fix_id])
        self.expect_state("disabled", "with TORCHFIX_DISABLE")
        self.expect_original(originals, "with TORCHFIX_DISABLE")

    def disabled_by_enabled_flag(self) -> None:
        from torchfix_core._env import env_key

        assert os.environ.get(env_key(self.fix_id)) == "0"
        originals = self.originals_after_import()
        self.tfc().apply(only=[self.fix_id])
        self.expect_state("disabled", f"with {env_key(self.fix_id)}=0")
        self.expect_original(originals, f"with {env_key(self.fix_id)}=0")

    def out_of_range_noop(self) -> None:
        from torchfix_core.testing._introspect import override_targets

        originals = self.originals_after_import()
        override_targets(self.fix_id, {"torch": "<1.0"})
        self.tfc().apply(only=[self.fix_id])
        self.expect_state("out-of-range", "validated only for torch<1.0")
        self.expect_original(originals, "out of range")

    def forced_out_of_range(self) -> None:
        from torchfix_core.testing._introspect import override_targets

        originals = self.originals_after_import()
        override_targets(self.fix_id, {"torch": "<1.0"})
        self.tfc().apply(only=[self.fix_id])
        self.expect_state(self.expected, "out of range but TORCHFIX_FORCE")
        self.expect_patched(originals, "out of range but TORCHFIX_FORCE")

    def probe_false_noop(self) -> None:
        from torchfix_core import ProbeResult

        originals = self.originals_after_import()
        self.impl_class().probe = lambda self: ProbeResult(False, "contract: probe says no")
        self.tfc().apply(only=[self.fix_id])
        self.expect_state("not-needed", "probe False")
        self.expect_original(originals, "probe False")

    def _break_apply(self) -> list[Any]:
        from torchfix_core import ProbeResult

        originals = self.originals_after_import()
        cls = self.impl_class()
        real_apply: Callable[[Any], None] = cls.apply

        def failing_apply(self: Any) -> None:
            try:
                real_apply(self)
            except Exception:  # noqa: BLE001 - a refusal is a failure too
                pass
            raise RuntimeError("contract: apply failed after patching")

        cls.probe = lambda self: ProbeResult(True, "contract: probe says yes")
        cls.apply = failing_apply
        return originals

    def failure_rolls_back(self) -> None:
        originals = self._break_apply()
        self.tfc().apply(only=[self.fix_id])
        self.expect_state("failed", "apply raised")
        assert "contract: apply failed" in self.reason(), self.reason()
        self.expect_original(originals, "after a failed apply (rollback)")

    def strict_failure_raises(self) -> None:
        assert os.environ.get("TORCHFIX_STRICT") == "1"
        originals = self._break_apply()
        from torchfix_core import TorchfixError

        try:
            self.tfc().apply(only=[self.fix_id])
        except TorchfixError as exc:
            assert "contract: apply failed" in str(exc), str(exc)
        else:
            raise AssertionError("TORCHFIX_STRICT=1 did not raise")
        self.expect_original(originals, "after a failed strict apply")


_ENV = {
    "activated_at_import_torch": {},
    "disabled_by_env": {"TORCHFIX_AUTOLOAD": "0", "TORCHFIX_DISABLE": "{id}"},
    "disabled_by_enabled_flag": {"TORCHFIX_AUTOLOAD": "0", "{flag}": "0"},
    "forced_out_of_range": {"TORCHFIX_AUTOLOAD": "0", "TORCHFIX_FORCE": "{id}"},
    "strict_failure_raises": {"TORCHFIX_AUTOLOAD": "0", "TORCHFIX_STRICT": "1"},
}


def case_env(case: str, fix_id: str) -> dict[str, str]:
    """Environment variables a case runs under (everything else starts with TORCHFIX_AUTOLOAD=0)."""
    from torchfix_core._env import env_key

    env = _ENV.get(case, {"TORCHFIX_AUTOLOAD": "0"})
    return {k.replace("{flag}", env_key(fix_id)): v.replace("{id}", fix_id) for k, v in env.items()}


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    case = Case(config)
    getattr(case, config["case"])()
    print(json.dumps(case.log))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
