"""TORCHFIX_* parsing: every malformed value or unknown id is one warning, never a crash."""

from __future__ import annotations

import logging

from torchfix_core._env import env_key, read_settings

KNOWN = ["autotune", "sac-replay"]


def settings(**env: str):
    return read_settings(KNOWN, env)


def test_defaults() -> None:
    s = settings()
    assert s.autoload and not s.strict and not s.disable_all and not s.problems


def test_disable_list_and_all() -> None:
    assert settings(TORCHFIX_DISABLE="autotune").is_disabled("autotune")[0]
    assert not settings(TORCHFIX_DISABLE="autotune").is_disabled("sac-replay")[0]
    s = settings(TORCHFIX_DISABLE="all")
    assert s.is_disabled("sac-replay") == (True, "TORCHFIX_DISABLE=all")


def test_enabled_flag_wins_over_disable() -> None:
    s = settings(TORCHFIX_DISABLE="all", TORCHFIX_SAC_REPLAY_ENABLED="1")
    assert not s.is_disabled("sac-replay")[0] and s.is_disabled("autotune")[0]
    assert settings(TORCHFIX_AUTOTUNE_ENABLED="0").is_disabled("autotune") == (True, "TORCHFIX_AUTOTUNE_ENABLED=0")
    assert env_key("sac-replay") == "TORCHFIX_SAC_REPLAY_ENABLED"


def test_unknown_id_is_reported_and_ignored() -> None:
    s = settings(TORCHFIX_DISABLE="autotune,nope")
    assert s.disabled == {"autotune"}
    assert len(s.problems) == 1 and "'nope'" in s.problems[0] and "TORCHFIX_DISABLE" in s.problems[0]


def test_malformed_booleans_keep_the_default_and_say_so() -> None:
    s = settings(TORCHFIX_AUTOLOAD="maybe", TORCHFIX_STRICT="2")
    assert s.autoload and not s.strict
    assert len(s.problems) == 2
    assert all("accepted: 1/0" in p for p in s.problems)


def test_boolean_spellings() -> None:
    for off in ("0", "false", "No", "OFF"):
        assert not settings(TORCHFIX_AUTOLOAD=off).autoload
    assert settings(TORCHFIX_STRICT="yes").strict


def test_force_and_log() -> None:
    s = settings(TORCHFIX_FORCE="sac-replay", TORCHFIX_LOG="debug")
    assert s.is_forced("sac-replay") and not s.is_forced("autotune")
    assert s.log_level == logging.DEBUG
    assert settings(TORCHFIX_LOG="loud").problems


def test_unknown_enabled_flag_and_unknown_variable() -> None:
    s = settings(TORCHFIX_NOPE_ENABLED="1", TORCHFIX_DISABEL="autotune", TORCHFIX_AUTOTUNE_ENABLED="perhaps")
    assert len(s.problems) == 3
    assert any("TORCHFIX_NOPE_ENABLED names no installed fix" in p for p in s.problems)
    assert any("TORCHFIX_DISABEL is not a torchfix variable" in p for p in s.problems)
    assert "autotune" not in s.enabled_override


def test_empty_entries_and_all_mixed() -> None:
    assert settings(TORCHFIX_DISABLE="autotune,,").problems
    s = settings(TORCHFIX_DISABLE="all,autotune")
    assert s.disable_all and s.problems


def test_a_fixs_declared_switch_is_validated_and_not_unknown() -> None:
    from torchfix_core.spec import EnvSwitch

    declared = [EnvSwitch("TORCHFIX_AUTOTUNE_VERBOSE", False, "h")]
    assert not read_settings(KNOWN, {"TORCHFIX_AUTOTUNE_VERBOSE": "1"}, switches=declared).problems
    (problem,) = read_settings(KNOWN, {"TORCHFIX_AUTOTUNE_VERBOSE": "loud"}, switches=declared).problems
    assert "TORCHFIX_AUTOTUNE_VERBOSE='loud' is not a boolean" in problem
    # undeclared, the same variable is unknown
    (problem,) = read_settings(KNOWN, {"TORCHFIX_AUTOTUNE_VERBOSE": "1"}).problems
    assert "is not a torchfix variable" in problem


def test_autoload_fast_path_and_settings_agree() -> None:
    from torchfix_core._env import autoload

    for raw, on in (("0", False), ("off", False), ("1", True), ("maybe", True), ("", True)):
        assert autoload({"TORCHFIX_AUTOLOAD": raw}) is on
        assert settings(TORCHFIX_AUTOLOAD=raw).autoload is on
    assert autoload({}) is True
