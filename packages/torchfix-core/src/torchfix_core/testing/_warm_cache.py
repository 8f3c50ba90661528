"""Warm-cache tests: a compile cache never undoes a fix (what every fix of effect ``compiled`` proves).

A fix that changes what torch compiles from the same graph is keyed in the FX graph and AOTAutograd
caches by torchfix-core (:mod:`torchfix_core._cache_key`). Its test shares one
``TORCHINDUCTOR_CACHE_DIR`` between fresh processes, in the orders of :data:`WARM_CACHE_ORDERS`:

* ``off, then on``: a process without the fix fills the cache (the bug), then one with it must not
  be served that artifact (a miss, and the reproduction is repaired), then another with it reuses
  its own (a hit: the term is the same in every process, warm caches keep working);
* ``on, then off``: a process with the fix fills it, then one without must miss (it compiles what
  unpatched torch compiles; the fix's artifact is never served under another key's claim);
* ``off, then on without its key term``: the same as the first two steps with the fix applied but
  its term dropped (:func:`drop_cache_key_term`): what a fix without the key term got, the red
  half of the test (the artifact compiled without the fix is served and the bug comes back).

The test gives :func:`warm_cache_runs` a function that runs one :class:`CacheStep` in a fresh
interpreter with the cache directory it is given and returns the scenario's JSON result, in which
:func:`compile_cache_counters` (called by the scenario script at its end) sits under ``"cache"``;
:func:`cache_step_arguments` gives that function the scenario's options and environment.

A fix whose warm-cache test is the usual four tests (the key, not the bug, on a graph any machine
compiles) subclasses :class:`WarmCacheContract` (name the subclass ``Test...``)::

    class TestWarmCache(WarmCacheContract):
        fix_id = FIX
        runner = staticmethod(run)  # run(scenario, *options, fix=..., env=...) -> JSON result

        def check(self, result):  # each step's result: the run went well
            assert_ok(result)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, NoReturn, Sequence

from torchfix_core.testing._introspect import outside_validated_range

__all__ = [
    "WARM_CACHE_ORDERS",
    "CacheStep",
    "WarmCacheContract",
    "cache_hits",
    "cache_step_arguments",
    "cold",
    "compile_cache_counters",
    "compile_cache_key_terms",
    "compile_caches_on",
    "compile_with_caches",
    "drop_cache_key_term",
    "warm_cache_runs",
]


@dataclasses.dataclass(frozen=True, slots=True)
class CacheStep:
    """One process of a warm-cache order: the fix on or off, and (on) whether it keeps its key term."""

    fix: bool
    key_term: bool = True

    @property
    def name(self) -> str:
        if not self.fix:
            return "off"
        return "on" if self.key_term else "on without its key term"


OFF, ON = CacheStep(False), CacheStep(True)
#: order name -> the processes that share one fresh cache directory, in turn
WARM_CACHE_ORDERS: dict[str, tuple[CacheStep, ...]] = {
    "off, then on": (OFF, ON, ON),
    "on, then off": (ON, OFF),
    "off, then on without its key term": (OFF, CacheStep(True, key_term=False)),
}


def warm_cache_runs(
    run_step: Callable[[CacheStep, Path], dict[str, Any]], root: Path
) -> dict[str, list[dict[str, Any]]]:
    """Run every order of :data:`WARM_CACHE_ORDERS`, each in its own fresh cache directory under
    ``root``; returns order name -> the results of its steps, in order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for index, (order, steps) in enumerate(WARM_CACHE_ORDERS.items()):
        cache = root / f"cache-{index}"
        cache.mkdir(parents=True, exist_ok=False)
        out[order] = [run_step(step, cache) for step in steps]
    return out


def cache_step_arguments(
    fix_id: str, which: CacheStep, cache: Path, *, bug_present: bool
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The scenario options and environment of one warm-cache step: ``--without-key-term`` for the
    step that drops the key term (only where the bug is present: without it the fix is not applied
    and holds no term to drop), ``TORCHINDUCTOR_CACHE_DIR`` set to ``cache``, and for a step with the
    fix on a torch outside its validated range ``TORCHFIX_FORCE`` (so the probe decides)."""
    options = () if which.key_term or not bug_present else ("--without-key-term",)
    forced = {"TORCHFIX_FORCE": fix_id} if which.fix and outside_validated_range(fix_id) else {}
    return options, {"TORCHINDUCTOR_CACHE_DIR": str(cache), **forced}


class WarmCacheContract:
    """Mix-in of the four warm-cache tests of a fix of effect ``compiled`` (see the module's text):

    * ``test_entry_from_before_the_fix_served_without_key_term``: off, then on without its key term:
      the entry compiled without the fix is served (the red half; skipped where the bug is absent);
    * ``test_entry_from_before_the_fix_not_served_with_fix``: off, then on: a miss, the fix applied
      and its ``key-changed`` event counted (where the bug is absent: ``not-needed`` and a hit);
    * ``test_key_term_is_stable_across_processes``: the third process of ``off, then on`` hits;
    * ``test_entry_compiled_with_fix_not_served_without_it``: on, then off: the second one misses.

    Set ``fix_id`` and ``runner`` (the package's ``run(scenario, *options, fix=..., env=...)``: one
    scenario in a fresh interpreter, this fix alone on or off, returning its JSON result, which
    carries ``"state"``, ``"report"`` and ``"cache"``), and override :meth:`check` (what every
    step's result must show: the run went well). ``scenario`` is the scenario's name (``"cache"``),
    ``cold_counter`` the miss counter a cold step must show. Whether the bug is present is the ``bug_present`` fixture the
    package's ``conftest.py`` provides (the test's own check, never the fix's probe). The orders run
    once per subclass, when a test first asks for them; nothing here imports pytest until then."""

    fix_id: ClassVar[str]
    runner: ClassVar[Callable[..., dict[str, Any]]]
    scenario: ClassVar[str] = "cache"
    cold_counter: ClassVar[str] = "fxgraph_miss"
    _orders: ClassVar[dict[type, dict[str, list[dict[str, Any]]] | BaseException]] = {}

    def check(self, result: dict[str, Any]) -> None:
        """What every step's result must show (raise AssertionError otherwise); nothing by default."""

    def run_scenario(self, options: Sequence[str], *, fix: bool, env: Mapping[str, str]) -> dict[str, Any]:
        """``runner`` on the cache scenario with ``options``, the fix on (``fix``) or off, in
        ``env``; the result passed through :meth:`check`."""
        result = type(self).runner(self.scenario, *options, fix=fix, env=dict(env))
        self.check(result)
        return result

    def run_step(
        self, cache: Path, *, fix: bool, options: Sequence[str] = (), env: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """:meth:`run_scenario` with ``cache`` as ``TORCHINDUCTOR_CACHE_DIR`` (forced past the range
        check with the fix on outside its validated range) and ``env`` on top."""
        _, step_env = cache_step_arguments(self.fix_id, CacheStep(fix), cache, bug_present=False)
        return self.run_scenario(tuple(options), fix=fix, env={**step_env, **(env or {})})

    def orders(self, tmp_path_factory: Any, bug_present: bool) -> dict[str, list[dict[str, Any]]]:
        """:func:`warm_cache_runs` of the cache scenario, once per subclass (a failure is kept and
        raised again, as pytest does for a fixture)."""
        cls = type(self)
        if cls not in WarmCacheContract._orders:

            def step(which: CacheStep, cache: Path) -> dict[str, Any]:
                options, env = cache_step_arguments(self.fix_id, which, cache, bug_present=bug_present)
                return self.run_scenario(options, fix=which.fix, env=env)

            try:
                WarmCacheContract._orders[cls] = warm_cache_runs(step, tmp_path_factory.mktemp("warm-cache"))
            except BaseException as exc:
                WarmCacheContract._orders[cls] = exc
                raise
        found = WarmCacheContract._orders[cls]
        if isinstance(found, BaseException):
            raise found
        return found

    def cold(self, result: dict[str, Any]) -> bool:
        """:func:`cold`, and at least one miss of ``cold_counter``."""
        return cold(result) and result["cache"][self.cold_counter] >= 1

    def test_entry_from_before_the_fix_served_without_key_term(self, tmp_path_factory: Any, bug_present: bool) -> None:
        if not bug_present:
            _skip("the fix does not act on this torch: no key term to take away")
        off, on = self.orders(tmp_path_factory, bug_present)["off, then on without its key term"]
        assert self.cold(off), off["cache"]
        # with the codegen patched but no key term, the entry compiled without the fix is served
        assert cache_hits(on) >= 1, on["cache"]

    def test_entry_from_before_the_fix_not_served_with_fix(self, tmp_path_factory: Any, bug_present: bool) -> None:
        off, on, _ = self.orders(tmp_path_factory, bug_present)["off, then on"]
        assert self.cold(off), off["cache"]
        if not bug_present:
            assert on["state"] == "not-needed" and cache_hits(on) >= 1, on
            return
        assert on["state"] == "applied", on
        assert self.cold(on), on["cache"]
        assert on["report"]["events"]["key-changed"] >= 1, on["report"]

    def test_key_term_is_stable_across_processes(self, tmp_path_factory: Any, bug_present: bool) -> None:
        if not bug_present:
            _skip("the fix does not act on this torch: no key term")
        on_again = self.orders(tmp_path_factory, bug_present)["off, then on"][2]
        assert cache_hits(on_again) >= 1, on_again

    def test_entry_compiled_with_fix_not_served_without_it(self, tmp_path_factory: Any, bug_present: bool) -> None:
        on, off = self.orders(tmp_path_factory, bug_present)["on, then off"]
        assert self.cold(on), on["cache"]
        if not bug_present:
            _skip("the fix does not act on this torch: both processes compile torch's own code")
        assert off["state"] == "disabled" and self.cold(off), off


def _skip(reason: str) -> NoReturn:
    import pytest

    pytest.skip(reason)


def compile_cache_counters() -> dict[str, int]:
    """This process's FX graph and AOTAutograd cache hits and misses (torch's own counters)."""
    from torch._dynamo.utils import counters

    return {
        "fxgraph_hit": int(counters["inductor"]["fxgraph_cache_hit"]),
        "fxgraph_miss": int(counters["inductor"]["fxgraph_cache_miss"]),
        "aot_hit": int(counters["aot_autograd"]["autograd_cache_hit"]),
        "aot_miss": int(counters["aot_autograd"]["autograd_cache_miss"]),
    }


def compile_caches_on() -> None:
    """In a scenario script: the FX graph and AOTAutograd caches on (local only), in the directory
    of ``TORCHINDUCTOR_CACHE_DIR``."""
    import torch
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = True
    inductor_config.fx_graph_remote_cache = False
    torch._functorch.config.enable_autograd_cache = True


def compile_with_caches(fix_id: str, options: Sequence[str]) -> dict[str, Any]:
    """A warm-cache test's ``cache`` scenario, after the script imported the fix's triggers: drop
    ``fix_id``'s key term where ``options`` hold ``--without-key-term``, turn the caches on
    (:func:`compile_caches_on`), compile ``(x * 3).clamp(-1, 1)`` on a seeded 64x64 CPU tensor and
    return ``{"cache": compile_cache_counters(), "equal": <compiled equals eager>}``."""
    import torch

    if "--without-key-term" in options:
        drop_cache_key_term(fix_id)
    compile_caches_on()
    torch.manual_seed(0)
    x = torch.randn(64, 64)

    def f(t: torch.Tensor) -> torch.Tensor:
        return (t * 3).clamp(-1, 1)

    out = torch.compile(f)(x)
    return {"cache": compile_cache_counters(), "equal": bool(torch.equal(out, f(x)))}


def compile_cache_key_terms() -> dict[str, dict[str, str] | None]:
    """In a scenario script: the compile caches' key term (torchfix-core's ``torchfix_fixes``: fix id
    -> detail; None where there is no term) on a fresh ``FxGraphHashDetails`` (``"fx"``) and
    ``AOTAutogradCacheDetails`` (``"aot"``) of a one-``mm`` graph."""
    import torch
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCacheDetails
    from torch._guards import TracingContext, tracing
    from torch._inductor.codecache import FxGraphHashDetails
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.ops.aten.mm.default, (x, x)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)

    def term(details: object) -> dict[str, str] | None:
        found = getattr(details, "torchfix_fixes", None)
        return None if found is None else {fix_id: detail for fix_id, _version, detail in found}

    fx_details = FxGraphHashDetails(gm, [], {}, [])
    with tracing(TracingContext(FakeTensorMode(shape_env=ShapeEnv()))):
        aot_details = AOTAutogradCacheDetails(gm, [], None, {})  # type: ignore[arg-type]
    return {"fx": term(fx_details), "aot": term(aot_details)}


def cache_hits(result: dict[str, Any]) -> int:
    """FX graph plus AOTAutograd cache hits of one step's result (its ``"cache"`` counters)."""
    counters = result["cache"]
    return int(counters["fxgraph_hit"] + counters["aot_hit"])


def cold(result: dict[str, Any]) -> bool:
    """The step compiled afresh: no FX graph or AOTAutograd cache hit, at least one miss."""
    counters = result["cache"]
    return cache_hits(result) == 0 and counters["fxgraph_miss"] + counters["aot_miss"] >= 1


def drop_cache_key_term(fix_id: str) -> None:
    """In a scenario script, after ``fix_id`` was applied: take its compile-cache key term away, the
    fix's patches staying in place (the red half of a warm-cache test: what torchfix did before the
    key term). AssertionError when the fix holds no term."""
    from torchfix_core import _cache_key

    if fix_id not in _cache_key.terms():
        raise AssertionError(f"{fix_id} holds no compile-cache key term (applied? effect compiled?)")
    _cache_key.remove_term(fix_id)
