"""The shared patching layer: exact revert, idempotence, shape checks, thread safety."""

from __future__ import annotations

import threading
import types

import pytest
from torchfix_core.patching import PatchRefused, PatchSet, is_torchfix_wrapper


def _add_one(f):
    def wrapper(*args, **kwargs):
        return f(*args, **kwargs) + 1

    return wrapper


def make_module() -> types.ModuleType:
    mod = types.ModuleType("target_mod")

    def compute(x, y=2):
        """Original docstring."""
        return x * y

    mod.compute = compute
    return mod


class Target:
    def method(self, a):
        return a

    @staticmethod
    def static(a):
        return a

    @classmethod
    def klass(cls, a):
        return a


class Child(Target):
    pass


def test_wrap_then_revert_restores_identical_object():
    mod = make_module()
    original = mod.compute
    patches = PatchSet("t")
    patches.wrap(mod, "compute", _add_one, signature=("x", "y"))
    assert mod.compute is not original
    assert mod.compute(3) == 7
    assert mod.compute.__wrapped__ is original
    assert mod.compute.__name__ == "compute" and mod.compute.__doc__ == "Original docstring."
    assert is_torchfix_wrapper(mod.compute)
    assert patches.revert() == []
    assert mod.compute is original


def test_wrap_twice_is_a_noop():
    mod = make_module()
    patches = PatchSet("t")
    first = patches.wrap(mod, "compute", _add_one)
    second = patches.wrap(mod, "compute", _add_one)
    assert first is second is mod.compute
    assert mod.compute(3) == 7  # wrapped once, not twice


def test_static_and_class_methods_keep_their_descriptor_type():
    raw_static, raw_class = Target.__dict__["static"], Target.__dict__["klass"]
    patches = PatchSet("t")
    patches.wrap(Target, "static", _add_one)
    patches.wrap(Target, "klass", _add_one)
    assert isinstance(Target.__dict__["static"], staticmethod)
    assert isinstance(Target.__dict__["klass"], classmethod)
    assert Target.static(1) == 2 and Target().klass(1) == 2
    patches.revert()
    assert Target.__dict__["static"] is raw_static and Target.__dict__["klass"] is raw_class


def test_inherited_attribute_is_refused():
    with pytest.raises(PatchRefused, match="inherited"):
        PatchSet("t").wrap(Child, "method", _add_one)
    assert "method" not in Child.__dict__


def test_missing_attribute_is_refused():
    with pytest.raises(PatchRefused, match="does not exist"):
        PatchSet("t").wrap(make_module(), "nope", _add_one)


def test_signature_mismatch_is_refused_and_nothing_changes():
    mod = make_module()
    original = mod.compute
    with pytest.raises(PatchRefused, match=r"has parameters \('x', 'y'\), expected \('x',\)"):
        PatchSet("t").wrap(mod, "compute", _add_one, signature=("x",))
    assert mod.compute is original


def test_non_function_is_refused():
    mod = make_module()
    mod.compute = len
    with pytest.raises(PatchRefused, match="expected a Python function"):
        PatchSet("t").wrap(mod, "compute", _add_one)


def test_wrapping_a_torchfix_wrapper_is_refused():
    mod = make_module()
    PatchSet("first").wrap(mod, "compute", _add_one)
    with pytest.raises(PatchRefused, match="already a torchfix wrapper of 'first'"):
        PatchSet("second").wrap(mod, "compute", _add_one)


def test_revert_leaves_a_foreign_repatch_alone_and_reports_it():
    mod = make_module()
    patches = PatchSet("t")
    patches.wrap(mod, "compute", _add_one)

    def foreign(x, y=2):
        return 0

    mod.compute = foreign
    problems = patches.revert()
    assert mod.compute is foreign
    assert problems and "replaced after torchfix patched it" in problems[0]


def test_swap_code_reaches_every_binding_and_reverts():
    mod = make_module()
    alias = mod.compute  # like `from mod import compute` elsewhere
    original_code = alias.__code__

    def replacement(x, y=2):
        return -1

    patches = PatchSet("t")
    patches.swap_code(mod.compute, replacement.__code__, signature=("x", "y"))
    assert alias(3) == -1
    patches.swap_code(mod.compute, replacement.__code__)  # idempotent
    patches.revert()
    assert alias.__code__ is original_code and alias(3) == 6


def test_swap_code_refuses_different_free_variables():
    mod = make_module()
    outer = 1

    def closure(x, y=2):
        return outer

    with pytest.raises(PatchRefused, match="free variables"):
        PatchSet("t").swap_code(mod.compute, closure.__code__)


def test_replace_with_check_refuses_unexpected_shape():
    mod = make_module()
    with pytest.raises(PatchRefused, match="not a dict"):
        PatchSet("t").replace(mod, "compute", {}, check=lambda old: None if isinstance(old, dict) else "not a dict")


def test_eight_threads_patching_and_reverting_concurrently_leave_the_original():
    mod = make_module()
    original = mod.compute
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(200):
                patches = PatchSet("t")
                try:
                    patches.wrap(mod, "compute", _add_one)
                except PatchRefused:
                    continue  # another thread holds the patch: refused, never half-applied
                assert mod.compute(1) == 3
                assert patches.revert() == []
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert mod.compute is original
