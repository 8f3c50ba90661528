"""The compile caches' key term (torchfix_core._cache_key) on the real torch: what a fix of effect
``compiled`` gets from the registry, proven on the objects torch hashes.

torch's FX graph cache key is computed by ``compiled_fx_graph_hash`` from an ``FxGraphHashDetails``;
the AOTAutograd key from its subclass ``AOTAutogradCacheDetails``. With a term held both carry it,
the key differs from torch's own and is the same for the same terms; with none the key is torch's
own again and ``FxGraphHashDetails.__init__`` is torch's function object. Unknown layouts are
refused before anything is patched.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torchfix_core import Effect, Fix, FixSpec, PatchRefused, _cache_key
from torchfix_core.patching import is_torchfix_wrapper
from torchfix_core.spec import KEYED_CACHE_MODULE

codecache = pytest.importorskip(KEYED_CACHE_MODULE)


class Detailed(Fix):
    """A fix implementation whose key detail a test sets."""

    def __init__(self, fix_id: str, detail: str = "") -> None:
        super().__init__(fix_id)
        self.detail = detail

    def cache_key_detail(self) -> str:
        return self.detail


@functools.cache
def _graph() -> torch.fx.GraphModule:
    """One small graph (one object: the key of a fresh GraphModule also hashes its class's identity)."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.ops.aten.sin.default, (x,)))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def fx_key() -> str:
    """The FX graph cache key of one small graph, as torch computes it now."""
    key, _ = codecache.compiled_fx_graph_hash(_graph(), [], {}, [])
    return str(key)


fx_key()  # the first key of a process differs from the later ones (torch initialises state lazily)


def aot_details() -> Any:
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCacheDetails
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with tracing(TracingContext(FakeTensorMode(shape_env=ShapeEnv()))):
        return AOTAutogradCacheDetails(_graph(), [], None, {})


@pytest.fixture(scope="module", autouse=True)
def no_fix_applied() -> Iterator[None]:
    """The installed fixes out of the way (a compiled-effect fix of the family would hold a term in
    this process), scheduled again afterwards."""
    import torchfix_core

    torchfix_core.revert()
    yield
    torchfix_core.apply()


@pytest.fixture(autouse=True)
def no_terms_left(no_fix_applied: None) -> Iterator[None]:
    original = vars(codecache.FxGraphHashDetails)["__init__"]
    assert not _cache_key.terms(), "a term from another test"
    yield
    for fix_id in list(_cache_key.terms()):
        _cache_key.remove_term(fix_id)
    assert vars(codecache.FxGraphHashDetails)["__init__"] is original


def test_term_changes_both_keys_and_revert_restores_torchs_key() -> None:
    original = vars(codecache.FxGraphHashDetails)["__init__"]
    own = fx_key()
    assert fx_key() == own  # torch's key is deterministic: the comparison below means something
    _cache_key.add_term("demo-compiled", "1.0", Detailed("demo-compiled"))
    assert is_torchfix_wrapper(vars(codecache.FxGraphHashDetails)["__init__"])
    keyed = fx_key()
    assert keyed != own and fx_key() == keyed
    assert getattr(aot_details(), _cache_key.ATTRIBUTE) == (("demo-compiled", "1.0", ""),)
    assert _cache_key.remove_term("demo-compiled") == []
    assert vars(codecache.FxGraphHashDetails)["__init__"] is original
    assert fx_key() == own
    assert not hasattr(aot_details(), _cache_key.ATTRIBUTE)


def test_version_and_detail_are_part_of_the_key() -> None:
    impl = Detailed("demo-compiled", "codegen A")
    _cache_key.add_term("demo-compiled", "1.0", impl)
    first = fx_key()
    impl.detail = "codegen B"  # read on every key: a change of what the fix emits changes the key
    assert fx_key() != first
    impl.detail = "codegen A"
    assert fx_key() == first
    _cache_key.add_term("demo-compiled", "1.1", impl)  # an upgrade of the fix
    assert fx_key() != first


def test_terms_of_two_fixes_share_one_wrapper_until_the_last_goes() -> None:
    _cache_key.add_term("demo-b", "1", Detailed("demo-b"))
    wrapper = vars(codecache.FxGraphHashDetails)["__init__"]
    only_b = fx_key()
    _cache_key.add_term("demo-a", "1", Detailed("demo-a"))
    _cache_key.add_term("demo-a", "1", Detailed("demo-a"))  # idempotent
    assert vars(codecache.FxGraphHashDetails)["__init__"] is wrapper and len(_cache_key.key_patches()) == 1
    both = fx_key()
    assert both != only_b
    assert [fix_id for fix_id, _, _ in _cache_key.term_tuple()] == ["demo-a", "demo-b"]  # sorted: one key
    assert _cache_key.remove_term("demo-a") == []
    assert vars(codecache.FxGraphHashDetails)["__init__"] is wrapper and fx_key() == only_b
    assert _cache_key.remove_term("demo-b") == []
    assert _cache_key.key_patches() == []


def test_unknown_init_signature_is_refused_before_patching(monkeypatch: pytest.MonkeyPatch) -> None:
    def __init__(self: Any, gm: Any, example_inputs: Any, fx_kwargs: Any) -> None:  # another layout
        pass

    monkeypatch.setattr(codecache.FxGraphHashDetails, "__init__", __init__)
    with pytest.raises(PatchRefused, match=r"FxGraphHashDetails.__init__ has parameters"):
        _cache_key.add_term("demo-compiled", "1.0", Detailed("demo-compiled"))
    assert vars(codecache.FxGraphHashDetails)["__init__"] is __init__
    assert _cache_key.terms() == {} and _cache_key.key_patches() == []


def test_aot_details_not_a_subclass_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    autograd_cache = pytest.importorskip(_cache_key.AUTOGRAD_CACHE_MODULE)
    monkeypatch.setattr(autograd_cache, "AOTAutogradCacheDetails", type("AOTAutogradCacheDetails", (), {}))
    with pytest.raises(PatchRefused, match="AOTAutograd key would not carry the term"):
        _cache_key.add_term("demo-compiled", "1.0", Detailed("demo-compiled"))
    assert _cache_key.terms() == {} and _cache_key.key_patches() == []


def test_cache_module_not_imported_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, KEYED_CACHE_MODULE)
    with pytest.raises(PatchRefused, match="is not imported"):
        _cache_key.add_term("demo-compiled", "1.0", Detailed("demo-compiled"))
    assert _cache_key.terms() == {}


def _spec(**fields: Any) -> FixSpec:
    base: dict[str, Any] = dict(
        id="demo-compiled",
        summary="s",
        implementation="m:C",
        distribution="torchfix-demo-compiled",
        targets={"torch": ">=2.8"},
        triggers=("torch._functorch.partitioners",),
    )
    return FixSpec(**{**base, **fields})


def test_spec_of_a_compiled_fix_must_wait_for_the_cache_module() -> None:
    assert _spec().effect is Effect.RUNTIME
    with pytest.raises(ValueError, match="lists torch._inductor.codecache among its triggers"):
        _spec(effect=Effect.COMPILED)
    spec = _spec(effect=Effect.COMPILED, triggers=("torch._functorch.partitioners", KEYED_CACHE_MODULE))
    assert spec.effect == "compiled"
    with pytest.raises(ValueError, match="effect must be an Effect"):
        _spec(effect="compiled")
