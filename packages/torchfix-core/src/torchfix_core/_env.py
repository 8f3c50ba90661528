"""The ``TORCHFIX_*`` environment switches: the one place that reads them, validated loudly.

=========================  ===========================================================
``TORCHFIX_AUTOLOAD``      ``0`` turns off activation at ``import torch`` (default ``1``)
``TORCHFIX_DISABLE``       comma-separated fix ids, or ``all``
``TORCHFIX_<ID>_ENABLED``  ``0``/``1`` per fix (id upper-cased, ``-`` -> ``_``); wins over DISABLE
``TORCHFIX_FORCE``         comma-separated fix ids, or ``all``: apply outside the validated
                           version range (the probe still decides)
``TORCHFIX_STRICT``        ``1``: a failing fix raises :class:`torchfix_core.TorchfixError`
``TORCHFIX_LOG``           ``debug`` | ``info`` | ``warning``: log level of the ``torchfix`` logger
``TORCHFIX_EXPLAIN``       ``0``: no known-bug note after an uncaught exception (default ``1``)
``TORCHFIX_REPORT``        a directory: each process writes its report there at exit
``TORCHFIX_<ID>_...``      a fix's own switches, declared in its ``FixSpec`` (``switches=``)
=========================  ===========================================================

A malformed value or an unknown fix id never crashes and never silently changes behaviour: it
emits one :class:`TorchfixConfigWarning` naming the variable and the accepted values, the
offending part is ignored, and the problem is listed by doctor.

This module imports only ``os`` at module level: :mod:`torchfix_core.auto` (imported at the start
of every Python child under ``torchfix-run``) and the ``TORCHFIX_AUTOLOAD=0`` fast path use it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, Mapping

if TYPE_CHECKING:
    from typing import Protocol

    class EnvSwitch(Protocol):
        """What the settings parser reads of a :class:`torchfix_core.EnvSwitch` (structural, so
        that this module, which ``spec`` uses, does not depend on ``spec``)."""

        @property
        def name(self) -> str: ...
        @property
        def default(self) -> bool: ...


PREFIX = "TORCHFIX_"
_BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
BOOL_ACCEPTED = "1/0, true/false, yes/no, on/off"
_LEVELS = ("debug", "info", "warning", "error")
_ENABLED_SUFFIX = "_ENABLED"
#: the core's own variables (a fix's own are declared in its FixSpec)
CORE_VARS = ("AUTOLOAD", "DISABLE", "FORCE", "STRICT", "LOG", "ACTIVATION_SOURCE", "EXPLAIN", "REPORT")
ACTIVATION_SOURCES = ("torchfix_core.auto", "torchfix-run")
"""Accepted values of ``TORCHFIX_ACTIVATION_SOURCE`` (set by ``torchfix-run`` for
:mod:`torchfix_core.auto`); anything else is reported and ignored, so doctor never shows an
activation path that did not happen."""

_emitted: set[str] = set()


def parse_bool_word(raw: str | None) -> bool | None:
    """``True``/``False`` for the accepted words (case and surrounding blanks ignored), ``None`` for an
    unset, empty or malformed value. The one reading of a boolean ``TORCHFIX_*`` value: the settings
    parser, :func:`autoload` and :meth:`torchfix_core.EnvSwitch.is_on` all call it."""
    if raw is None:
        return None
    return _BOOL_WORDS.get(raw.strip().lower())


def autoload(environ: Mapping[str, str] | None = None) -> bool:
    """``TORCHFIX_AUTOLOAD``: False only for an accepted false word (a malformed value keeps the
    default, on, and is reported by :func:`read_settings`)."""
    return parse_bool_word((os.environ if environ is None else environ).get("TORCHFIX_AUTOLOAD")) is not False


def requested_activation_source(environ: Mapping[str, str] | None = None) -> str:
    """``TORCHFIX_ACTIVATION_SOURCE`` when it is one of :data:`ACTIVATION_SOURCES`, else
    ``torchfix_core.auto`` (what importing :mod:`torchfix_core.auto` means)."""
    raw = (os.environ if environ is None else environ).get("TORCHFIX_ACTIVATION_SOURCE", "").strip()
    return raw if raw in ACTIVATION_SOURCES else ACTIVATION_SOURCES[0]


def quiet(environ: Mapping[str, str] | None = None) -> bool:
    """True when no ``TORCHFIX_*`` variable asks for anything or could be malformed: each one set
    is ``TORCHFIX_AUTOLOAD`` with a true word or ``TORCHFIX_ACTIVATION_SOURCE`` with an accepted
    value. Only then may activation defer reading the settings (:func:`read_settings` needs the
    fixes' specs for their own switches), so that every warning about the environment is still
    given at ``import torch``."""
    env = os.environ if environ is None else environ
    for name, raw in env.items():
        if not name.startswith(PREFIX):
            continue
        if name == "TORCHFIX_AUTOLOAD" and parse_bool_word(raw) is True:
            continue
        if name == "TORCHFIX_ACTIVATION_SOURCE" and raw.strip() in ACTIVATION_SOURCES:
            continue
        return False
    return True


class TorchfixConfigWarning(UserWarning):
    """A ``TORCHFIX_*`` variable had a value torchfix could not use; it was ignored."""


def warn_once(message: str) -> None:
    if message in _emitted:
        return
    _emitted.add(message)
    import logging
    import warnings

    logging.getLogger("torchfix").debug("config warning: %s", message)
    warnings.warn(message, TorchfixConfigWarning, stacklevel=3)


def env_key(fix_id: str) -> str:
    """``my-fix`` -> ``TORCHFIX_MY_FIX_ENABLED``."""
    return f"{PREFIX}{fix_id.upper().replace('-', '_')}{_ENABLED_SUFFIX}"


def parse_bool(name: str, raw: str | None, default: bool, problems: list[str]) -> bool:
    if raw is None or raw.strip() == "":
        return default
    value = parse_bool_word(raw)
    if value is None:
        problems.append(
            f"{name}={raw!r} is not a boolean (accepted: {BOOL_ACCEPTED}); using the default {int(default)}"
        )
        return default
    return value


class Settings:
    """The parsed environment. ``problems`` lists every warning that parsing produced."""

    def __init__(self) -> None:
        self.autoload = True
        self.strict = False
        self.disable_all = False
        self.disabled: set[str] = set()
        self.force_all = False
        self.forced: set[str] = set()
        self.enabled_override: dict[str, bool] = {}
        self.log_level: int | None = None
        self.explain = True
        self.report_dir: str | None = None
        self.problems: list[str] = []

    def is_disabled(self, fix_id: str) -> tuple[bool, str]:
        """Whether the environment turns ``fix_id`` off, and the reason to show."""
        if fix_id in self.enabled_override:
            on = self.enabled_override[fix_id]
            return (not on, f"{env_key(fix_id)}={int(on)}")
        if self.disable_all:
            return True, "TORCHFIX_DISABLE=all"
        if fix_id in self.disabled:
            return True, f"TORCHFIX_DISABLE lists {fix_id!r}"
        return False, ""

    def is_forced(self, fix_id: str) -> bool:
        return self.force_all or fix_id in self.forced


def _parse_ids(name: str, raw: str | None, known: Iterable[str], problems: list[str]) -> tuple[bool, set[str]]:
    if raw is None or raw.strip() == "":
        return False, set()
    known_set = set(known)
    ids = [part.strip() for part in raw.split(",")]
    if any(part.lower() == "all" for part in ids):
        if len([p for p in ids if p]) > 1:
            problems.append(f"{name}={raw!r} mixes 'all' with fix ids; treating it as 'all'")
        return True, set()
    chosen: set[str] = set()
    if "" in ids:
        problems.append(f"{name}={raw!r} has an empty entry (accepted: comma-separated fix ids or 'all')")
    for part in ids:
        if not part:
            continue
        if part not in known_set:
            accepted = ", ".join(sorted(known_set)) or "none installed"
            problems.append(f"{name} names unknown fix id {part!r}; ignored (known ids: {accepted}, or 'all')")
        else:
            chosen.add(part)
    return False, chosen


def read_settings(
    known_ids: Iterable[str], environ: Mapping[str, str] | None = None, switches: Iterable[EnvSwitch] = ()
) -> Settings:
    """Parse the environment against the installed fix ids and the switches their specs declare.
    Never raises."""
    import logging

    env = os.environ if environ is None else environ
    known = sorted(set(known_ids))
    declared = {switch.name: switch for switch in switches}
    settings = Settings()
    problems = settings.problems
    settings.autoload = parse_bool("TORCHFIX_AUTOLOAD", env.get("TORCHFIX_AUTOLOAD"), True, problems)
    settings.strict = parse_bool("TORCHFIX_STRICT", env.get("TORCHFIX_STRICT"), False, problems)
    settings.disable_all, settings.disabled = _parse_ids(
        "TORCHFIX_DISABLE", env.get("TORCHFIX_DISABLE"), known, problems
    )
    settings.force_all, settings.forced = _parse_ids("TORCHFIX_FORCE", env.get("TORCHFIX_FORCE"), known, problems)
    raw_level = env.get("TORCHFIX_LOG")
    if raw_level is not None and raw_level.strip():
        level = raw_level.strip().lower()
        if level not in _LEVELS:
            problems.append(f"TORCHFIX_LOG={raw_level!r} is not a level (accepted: {', '.join(_LEVELS)}); ignored")
        else:
            settings.log_level = logging.getLevelName(level.upper())
    settings.explain = parse_bool("TORCHFIX_EXPLAIN", env.get("TORCHFIX_EXPLAIN"), True, problems)
    raw_report = env.get("TORCHFIX_REPORT")
    if raw_report is not None and raw_report.strip():
        if os.path.exists(raw_report.strip()) and not os.path.isdir(raw_report.strip()):
            problems.append(f"TORCHFIX_REPORT={raw_report!r} is not a directory: no report will be written")
        else:
            settings.report_dir = raw_report.strip()
    for name, switch in sorted(declared.items()):
        parse_bool(name, env.get(name), switch.default, problems)
    raw_source = env.get("TORCHFIX_ACTIVATION_SOURCE")
    if raw_source is not None and raw_source.strip() and raw_source.strip() not in ACTIVATION_SOURCES:
        problems.append(
            f"TORCHFIX_ACTIVATION_SOURCE={raw_source!r} is not an activation source "
            f"(accepted: {', '.join(ACTIVATION_SOURCES)}); ignored"
        )
    by_key = {env_key(fix_id): fix_id for fix_id in known}
    for name in sorted(env):
        if not name.startswith(PREFIX) or name in declared:
            continue
        if name.endswith(_ENABLED_SUFFIX) and len(name) > len(PREFIX) + len(_ENABLED_SUFFIX):
            fix_id = by_key.get(name)
            if fix_id is None:
                problems.append(f"{name} names no installed fix; ignored (installed: {', '.join(known) or 'none'})")
                continue
            marker: list[str] = []
            value = parse_bool(name, env[name], True, marker)
            if marker:
                problems.append(f"{name}={env[name]!r} is not a boolean (accepted: {BOOL_ACCEPTED}); ignored")
            else:
                settings.enabled_override[fix_id] = value
        elif name[len(PREFIX) :] not in CORE_VARS:
            own = f", the installed fixes' own: {', '.join(sorted(declared))}" if declared else ""
            problems.append(
                f"{name} is not a torchfix variable; ignored (known: TORCHFIX_AUTOLOAD, TORCHFIX_DISABLE, "
                f"TORCHFIX_<ID>_ENABLED, TORCHFIX_FORCE, TORCHFIX_STRICT, TORCHFIX_LOG, TORCHFIX_EXPLAIN, "
                f"TORCHFIX_REPORT{own})"
            )
    return settings


def configure_logging(level: int | None) -> None:
    """Give the ``torchfix`` logger a stderr handler at ``level`` (only when TORCHFIX_LOG is set)."""
    if level is None:
        return
    import logging

    logger = logging.getLogger("torchfix")
    logger.setLevel(level)
    if not any(getattr(h, "_torchfix", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[torchfix %(levelname)s] %(message)s"))
        handler._torchfix = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
