"""torchfix_core.spec helpers that fix packages use at import time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from torchfix_core.spec import STATES, EnvSwitch, FixSpec, FixState, lazy_version


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


def _spec(**extra: object) -> FixSpec:
    fields: dict[str, object] = dict(
        id="my-fix", summary="s", implementation="m:C", distribution="d", targets={"torch": ">=2.5"}, triggers=["m"]
    )
    fields.update(extra)
    return FixSpec(**fields)  # type: ignore[arg-type]


def test_fix_spec_is_a_frozen_slotted_dataclass_with_value_equality() -> None:
    import dataclasses

    targets = {"torch": ">=2.5"}
    spec = _spec(targets=targets)
    targets["torch"] = "<1.0"  # the caller's dict is copied
    assert spec.targets == {"torch": ">=2.5"} and spec.triggers == ("m",)
    assert spec == _spec() and spec != _spec(order=5)
    assert repr(spec).startswith("FixSpec(id='my-fix', summary='s'")
    with pytest.raises(AttributeError):
        spec.id = "other"  # type: ignore[misc]
    assert not hasattr(spec, "__dict__")  # slotted
    with pytest.raises(TypeError):
        FixSpec("my-fix", "s", "m:C", "d", {}, ("m",))  # type: ignore[misc]  # keywords only
    assert dataclasses.is_dataclass(spec) and dataclasses.is_dataclass(EnvSwitch("TORCHFIX_MY_FIX_X", True, "h"))
    assert [f.name for f in dataclasses.fields(spec)][:2] == ["id", "summary"]
    assert dataclasses.replace(spec, order=5) == _spec(order=5)  # replace() validates and normalizes too
    with pytest.raises(ValueError, match="trigger"):
        dataclasses.replace(spec, triggers=[])


def test_fix_spec_refuses_bad_declarations() -> None:
    with pytest.raises(ValueError, match="module:attribute"):
        _spec(implementation="no-colon")
    with pytest.raises(ValueError, match="trigger"):
        _spec(triggers=())
    with pytest.raises(ValueError, match="TORCHFIX_MY_FIX_"):
        _spec(switches=(EnvSwitch("TORCHFIX_OTHER_THING", True, "h"),))
    with pytest.raises(ValueError, match="unversioned names libraries that are not in targets"):
        _spec(targets={"torch": ">=2.5"}, unversioned=("magi_compiler",))
    assert _spec(targets={"torch": ">=2.5"}, unversioned=["torch"]).unversioned == ("torch",)


def test_env_switch_reads_the_environment_on_every_call() -> None:
    switch = EnvSwitch("TORCHFIX_MY_FIX_MEMO", True, "h")
    assert switch.is_on({}) is True
    assert switch.is_on({"TORCHFIX_MY_FIX_MEMO": " Off "}) is False
    assert switch.is_on({"TORCHFIX_MY_FIX_MEMO": "maybe"}) is True  # malformed: the default (reported at activation)


def test_states_are_a_str_enum_that_prints_and_serializes_as_its_value() -> None:
    import json

    assert STATES == tuple(FixState) and len(STATES) == 7
    assert FixState.NOT_NEEDED == "not-needed" and f"{FixState.NOT_NEEDED}" == "not-needed"
    assert json.dumps({"state": FixState.APPLIED}) == '{"state": "applied"}'


def test_signature_needs_a_message_pattern_or_a_silent_symptom() -> None:
    from torchfix_core.spec import FixSpec, Signature

    loud = Signature(
        exception="CheckpointError", message=r"Recomputed values", when="compiled code", context="unpack_hook"
    )
    assert not loud.silent and loud.as_dict() == {
        "exception": "CheckpointError",
        "message": "Recomputed values",
        "when": "compiled code",
        "context": "unpack_hook",
    }
    assert Signature(symptom="wrong gradient").silent
    with pytest.raises(ValueError, match="give exception and message"):
        Signature(exception="RuntimeError")
    with pytest.raises(ValueError, match="silent symptom has no exception"):
        Signature(symptom="x", message="y")
    with pytest.raises(ValueError, match="must be a class name"):
        Signature(exception="torch.Error: x", message="y")
    with pytest.raises(ValueError, match="signatures must be Signature records"):
        FixSpec(
            id="s",
            summary="s",
            implementation="m:a",
            distribution="d",
            targets={},
            triggers=("m",),
            signatures=({"exception": "E"},),
        )  # type: ignore[arg-type]
