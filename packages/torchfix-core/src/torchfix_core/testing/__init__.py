"""Test kit shared by every fix package.

Subclass :class:`FixContract` in a fix's tests (name the subclass ``Test...``) to prove the same
lifecycle guarantees for every fix, each case in a fresh Python subprocess::

    class TestContract(FixContract):
        fix_id = "my-fix"
        patched = [("torch.utils.checkpoint", "_CheckpointFrame.__init__")]
        expected_state = "applied"        # or applied_where(bug_present): the test's own check decides

Scenario scripts (:mod:`torchfix_core.testing._scenario`): :func:`run_json_script` runs one in a
fresh interpreter from :func:`clean_environ` (no ``TORCHFIX_*`` variable of the caller's) and returns
the JSON object it prints last (:func:`scenario_main` is such a script's ``main``); :func:`only_fix` leaves one fix alone on or off; :func:`reproduce`
runs a fix's declared reproduction (``FixSpec.reproduction``) so, as ``torchfix-doctor verify`` does;
:func:`print_recorded_gpu_run` prints a recorded GPU run for a demo on a machine without a GPU,
and :func:`demo_line` formats one scenario result as a demo's line (its error where it failed);
:func:`print_gpu_fix_demo` is the whole demo section of a fix whose bug shows on a GPU (:class:`DemoCheck`).
Pytest fixtures live in :mod:`torchfix_core.testing.fixtures` (it imports pytest; nothing here does).

Signature tests (:mod:`torchfix_core.testing._explain`): :func:`failure_text` turns a red run's
result into the error text Python printed, :func:`assert_explained` runs ``torchfix-doctor explain``
on it (``isolated=True``: nothing but the core and the family's catalog importable, so no fix
installed and no torch), :func:`assert_explained_both_ways` checks one red run's output both
``not-installed`` and ``disabled``, :func:`assert_silent_signatures` checks a silent symptom's
signatures, :func:`applied_report` checks a green run's report row, and :func:`report_of` is a scenario script's view of one fix's row of
``torchfix_core.report()``.

Warm-cache tests (:mod:`torchfix_core.testing._warm_cache`), which every fix of effect ``compiled``
has: :func:`warm_cache_runs` runs a scenario in the orders of :data:`WARM_CACHE_ORDERS` (fix off
then on, on then off, off then on without its key term) with one cache directory per order;
:func:`cache_step_arguments` gives one step its options and environment;
:func:`compile_cache_counters` (in the scenario script), :func:`cache_hits` and :func:`cold` read
the caches' counters; in the scenario script :func:`compile_caches_on` turns the caches on,
:func:`compile_with_caches` is the usual ``cache`` scenario's compile and
:func:`compile_cache_key_terms` reads the key term on a fresh graph's cache details; :func:`drop_cache_key_term` is the red half's switch. The usual four tests
(entry from before the fix served without the key term / not served with the fix / key term stable
across processes / entry compiled with the fix not served without it) come with subclassing
:class:`WarmCacheContract` (set ``fix_id``, implement ``run_scenario``; ``bug_present`` is the
package's conftest fixture).

:func:`page_statement` (:mod:`torchfix_core.testing._pages`): what a fix's page states, in a
per-release table, for the installed torch; a test measures the behaviour and compares.

The test hooks (:mod:`torchfix_core.testing._introspect`) read the core's state without private
names: :func:`fix_spec`, :func:`import_triggers`, :func:`live_patches`, :func:`cache_key_terms`,
:func:`cache_key_patches`, :func:`waiting_hooks`,
:func:`override_targets`, :func:`outside_validated_range`.
"""

from torchfix_core.testing._contract import (
    CASES,
    FixContract,
    applied_where,
    assert_inert_without,
    assert_version_does_not_decide,
    run_case,
    state_to_expect,
    status_with_library_version,
    status_without_library,
)
from torchfix_core.testing._explain import (
    applied_report,
    assert_explained,
    assert_explained_both_ways,
    assert_silent_signatures,
    explain_json,
    failure_text,
    report_of,
)
from torchfix_core.testing._introspect import (
    cache_key_patches,
    cache_key_terms,
    fix_spec,
    import_triggers,
    live_patches,
    outside_validated_range,
    override_targets,
    waiting_hooks,
)
from torchfix_core.testing._pages import page_statement
from torchfix_core.testing._scenario import (
    DemoCheck,
    ScenarioFailed,
    clean_environ,
    demo_line,
    demo_reproduction,
    describe_failure,
    fix_switch,
    only_fix,
    print_gpu_fix_demo,
    print_recorded_gpu_run,
    reproduce,
    run_json_script,
    run_json_script_timed,
    scenario_main,
)
from torchfix_core.testing._warm_cache import (
    WARM_CACHE_ORDERS,
    CacheStep,
    WarmCacheContract,
    cache_hits,
    cache_step_arguments,
    cold,
    compile_cache_counters,
    compile_cache_key_terms,
    compile_caches_on,
    compile_with_caches,
    drop_cache_key_term,
    warm_cache_runs,
)

__all__ = [
    "CASES",
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
    "DemoCheck",
    "FixContract",
    "ScenarioFailed",
    "applied_report",
    "applied_where",
    "cache_key_patches",
    "cache_key_terms",
    "assert_explained",
    "assert_explained_both_ways",
    "assert_inert_without",
    "assert_silent_signatures",
    "assert_version_does_not_decide",
    "clean_environ",
    "demo_line",
    "describe_failure",
    "explain_json",
    "failure_text",
    "fix_spec",
    "fix_switch",
    "import_triggers",
    "live_patches",
    "only_fix",
    "outside_validated_range",
    "page_statement",
    "override_targets",
    "print_gpu_fix_demo",
    "print_recorded_gpu_run",
    "report_of",
    "reproduce",
    "run_case",
    "run_json_script",
    "demo_reproduction",
    "run_json_script_timed",
    "scenario_main",
    "state_to_expect",
    "status_with_library_version",
    "status_without_library",
    "waiting_hooks",
]
