"""Cheap, data-only description of a fix: what an entry point in ``torchfix.fixes`` loads.

A fix package's ``package.py`` builds one :class:`FixSpec` (and the :class:`EnvSwitch` records it
declares) and nothing else. Loading it must not import torch, the patched library, or the fix's
implementation: this module imports only the standard library.

Both records are frozen slotted dataclasses. Creating a dataclass costs code generation (about
0.5-0.75 ms for these two on Python 3.11), which is why activation at ``import torch`` does not
import this module when it can defer loading the specs (docs/design.md, "Activation"): it reads
the fixes' trigger modules from entry-point metadata instead.

The state types (:class:`FixState`, :class:`ActivationSource`, :data:`STATES`, :class:`Effect`) are
defined in :mod:`torchfix_core._states` and :data:`PATCH_LOCK` in :mod:`torchfix_core._import_hooks` (two
leaves of the core); both are re-exported here.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

from torchfix_core._import_hooks import PATCH_LOCK
from torchfix_core._states import STATES, ActivationSource, Effect, FixState, StrEnum

__all__ = [
    "PATCH_LOCK",
    "STATES",
    "KEYED_CACHE_MODULE",
    "Reproduction",
    "ActivationSource",
    "Effect",
    "EnvSwitch",
    "FixSpec",
    "FixState",
    "Signature",
    "StrEnum",
    "env_prefix",
    "lazy_version",
]


@dataclasses.dataclass(frozen=True, slots=True)
class EnvSwitch:
    """A boolean environment variable a fix reads itself (e.g. ``TORCHFIX_MY_FIX_STRICT``).

    Declared in the fix's :class:`FixSpec` (``switches=``) so that the core knows the variable: it
    is not reported as unknown, and a malformed value gets one :class:`TorchfixConfigWarning` and a
    doctor line, like the core's own variables. The fix reads it with :meth:`is_on`, which never
    raises (a malformed value means ``default``). ``name`` must start with ``TORCHFIX_<ID>_``
    (the owning fix's id upper-cased, ``-`` -> ``_``)."""

    name: str
    default: bool
    help: str

    def is_on(self, environ: Mapping[str, str] | None = None) -> bool:
        """The switch's value now (``os.environ`` by default): read on every call, so a test or a
        user may change it at run time."""
        import os

        from torchfix_core._env import parse_bool_word

        value = parse_bool_word((os.environ if environ is None else environ).get(self.name))
        return self.default if value is None else value


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Signature:
    """One way a bug shows itself: what ``torchfix-doctor explain`` and the uncaught-exception
    diagnosis match (:mod:`torchfix_core._explain`).

    A failure with a message names ``exception`` (the class name as a traceback prints it; only the
    last dotted part is compared, and any class in the raised exception's MRO matches in process)
    and ``message``, a regular expression searched (:func:`re.search`, no flags) in the exception's
    message. Patterns come from the red runs of the fix's own reproductions on the real unpatched
    library, and must be specific to the bug: a pattern that would also match an ordinary user
    error (a plain dtype mismatch, an OOM) is wrong, and the family-shape test feeds a corpus of
    such errors to every pattern.

    A silent bug (a wrong gradient, a stale artifact) has no message: it declares ``symptom``, the
    symptom in words, and leaves ``exception`` and ``message`` empty; explain cannot match it in a
    log, the per-run report (``torchfix_core.report()``) shows whether the fix acted.

    ``releases`` says where this wording was seen, as ``"<library> <specifier>"`` (e.g.
    ``"torch >=2.13"``); empty means every release of the fix's range. ``when`` names the
    condition under which the message means this bug, where the message alone could have other
    causes (e.g. "the checkpointed code is torch.compile'd"); explain shows it. ``context`` is a
    regular expression that must also be found in the traceback printed before the message (its
    ``File ..., in <function>`` lines; in a log, also the same rank's 40 lines before the
    traceback, where warnings such as Dynamo's recompile reasons are), for a message that
    ordinary failures share: a dtype
    mismatch raised inside a checkpoint's recompute (``in unpack_hook``) is the bug, the same
    message from user code is not. A failure read without its traceback never matches a signature
    with a context.
    """

    exception: str = ""
    message: str = ""
    symptom: str = ""
    releases: str = ""
    when: str = ""
    context: str = ""

    def __post_init__(self) -> None:
        if self.symptom:
            if self.exception or self.message or self.context:
                raise ValueError("Signature: a silent symptom has no exception, message or context")
        elif not (self.exception and self.message):
            raise ValueError("Signature: give exception and message, or a silent symptom")
        if self.exception and not all(part.replace("_", "a").isalnum() for part in self.exception.split(".")):
            raise ValueError(f"Signature: exception must be a class name, got {self.exception!r}")

    @property
    def silent(self) -> bool:
        """True for a symptom without a message (nothing to match in a log)."""
        return bool(self.symptom)

    def as_dict(self) -> dict[str, str]:
        """The non-empty fields (the catalog's and ``--json``'s form)."""
        return {
            k: v
            for k, v in (
                ("exception", self.exception),
                ("message", self.message),
                ("symptom", self.symptom),
                ("releases", self.releases),
                ("when", self.when),
                ("context", self.context),
            )
            if v
        }


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Reproduction:
    """How a fix shows its bug on the machine it is installed on: one reproduction, shipped in the
    fix's wheel, that the fix's tests, ``nox -s demo``, the combination suite and
    ``torchfix-doctor verify`` all run (docs/design.md, "Reproductions").

    ``run`` is ``"module:function"`` in the fix's distribution: a function of no arguments that runs
    the bug's smallest real case and returns a :class:`torchfix_core.reproduction.Outcome` (the bug
    observed, with its measure; not observed; or cannot run here, with why). It is called in a fresh
    interpreter where only this fix is switched on or off (``python -m torchfix_core.reproduction
    ID``); an exception it raises means the reproduction broke. What it needs is declared, so that a
    machine without it reports the reproduction as skipped instead of failing:

    Attributes:
        run: ``"module:function"`` of the reproduction.
        measure: what the outcome's measure is, in words (``"the exception"``, ``"max gradient
            error against eager"``, ``"bytes differing"``).
        needs_cuda: the bug lives in CUDA code: skipped where ``torch.cuda.is_available()`` is false.
        ranks: gloo ranks the reproduction spawns itself (1: none).
        libraries: import name -> ``packaging`` specifier of each third-party library it drives
            (``{"transformer_engine": ">=2.18"}``); skipped where one is missing.
        seconds: about how long one run takes on a 2-core CPU (or the GPU, with ``needs_cuda``),
            what ``verify --budget`` plans with.
    """

    run: str
    measure: str
    needs_cuda: bool = False
    ranks: int = 1
    libraries: Mapping[str, str] = dataclasses.field(default_factory=dict)
    seconds: float = 30.0

    def __post_init__(self) -> None:
        module, _, function = self.run.partition(":")
        if not (module and function):
            raise ValueError(f"Reproduction: run must be 'module:function', got {self.run!r}")
        if not self.measure:
            raise ValueError("Reproduction: say what the measure is (measure=...)")
        if self.ranks < 1 or self.seconds <= 0:
            raise ValueError(f"Reproduction: ranks >= 1 and seconds > 0, got {self.ranks}, {self.seconds}")
        object.__setattr__(self, "libraries", dict(self.libraries))  # frozen: the one place that sets it

    def as_dict(self) -> dict[str, object]:
        """The declaration as ``--json`` shows it."""
        return {
            "run": self.run,
            "measure": self.measure,
            "needs_cuda": self.needs_cuda,
            "ranks": self.ranks,
            "libraries": dict(self.libraries),
            "seconds": self.seconds,
        }


#: the module whose ``FxGraphHashDetails`` the compile caches' key term wraps
#: (:mod:`torchfix_core._cache_key`): a fix of effect ``compiled`` lists it among its triggers, so
#: that the term is in place, and checked, when the fix is applied
KEYED_CACHE_MODULE = "torch._inductor.codecache"


def env_prefix(fix_id: str) -> str:
    """``my-fix`` -> ``TORCHFIX_MY_FIX_`` (the prefix of every variable of that fix)."""
    return f"TORCHFIX_{fix_id.upper().replace('-', '_')}_"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FixSpec:
    """Metadata of one fix: a frozen slotted dataclass, built with keyword arguments and validated
    when built (``ValueError`` naming the fix).

    Args:
        id: the fix id; must equal the entry-point name in group ``torchfix.fixes``.
        summary: one line saying what the fix repairs.
        implementation: ``"module:attribute"`` of the :class:`torchfix_core.Fix` subclass; imported
            only when the fix is about to be applied.
        distribution: the fix's own distribution name (for the installed version).
        targets: top-level import name of each patched library -> ``packaging`` specifier of the
            versions where the fix was validated (e.g. ``{"torch": ">=2.12,<2.16"}``). Outside the
            range the fix is ``out-of-range`` unless forced; the probe decides inside it.
        triggers: modules that must all be imported before the fix is applied. The fix is applied
            the moment the last one finishes importing (at once if they already are). Pick the
            module that defines the patched object, so that activation never imports it. The first
            one is also published as the distribution's ``torchfix.triggers`` entry point
            (``scripts/generate.py``), which lets activation wait without loading this spec.
        order: smaller applies first; ties are broken by id.
        after: ids of fixes that must be applied before this one when both apply.
        upstream: links to the upstream issue / pull request the fix backports.
        switches: the fix's own environment variables (besides ``TORCHFIX_<ID>_ENABLED``, which
            every fix has).
        signatures: the failures the bug produces (:class:`Signature`): exception and message
            patterns seen in the red runs of the fix's reproductions, per release where the wording
            differs, or the silent symptom in words. Every fix of the family declares at least one.
        effect: what the fix changes (:class:`Effect`): ``runtime`` (the default: hooks, modes,
            contexts; nothing torch compiles or caches), ``compiled`` (what torch compiles from the
            same graph: a partition, generated code; the registry then keys the FX graph and
            AOTAutograd caches on the fix while it is applied, and ``triggers`` must include
            :data:`KEYED_CACHE_MODULE`), or ``cache-key`` (how torch keys or looks up compiled
            artifacts). The fix's page says which, and why.
        reproduction: the bug's one shipped reproduction (:class:`Reproduction`), or ``None``.
        unversioned: libraries of ``targets`` whose version string does not identify their code
            (e.g. every commit of a project builds as ``1.0.0``, or ``0.0.0`` from a checkout
            without its version plugin). Their range documents where the fix was validated; it is
            never used to skip the fix: the probe decides, and the doctor's reason says so.

    Sequences are stored as tuples and ``targets`` as a copy, so a caller's list or dict cannot
    change the spec afterwards.
    """

    id: str
    summary: str
    implementation: str
    distribution: str
    targets: Mapping[str, str]
    triggers: tuple[str, ...]
    order: int = 100
    after: tuple[str, ...] = ()
    upstream: tuple[str, ...] = ()
    switches: tuple[EnvSwitch, ...] = ()
    signatures: tuple[Signature, ...] = ()
    effect: Effect = Effect.RUNTIME
    unversioned: tuple[str, ...] = ()
    reproduction: Reproduction | None = None

    def __post_init__(self) -> None:
        if ":" not in self.implementation:
            raise ValueError(
                f"FixSpec {self.id!r}: implementation must be 'module:attribute', got {self.implementation!r}"
            )
        if not self.triggers:
            raise ValueError(f"FixSpec {self.id!r}: at least one trigger module is required")
        prefix = env_prefix(self.id)
        for switch in self.switches:
            if not isinstance(switch, EnvSwitch) or not switch.name.startswith(prefix):
                raise ValueError(f"FixSpec {self.id!r}: switches must be EnvSwitch records named {prefix}*")
        if not all(isinstance(signature, Signature) for signature in self.signatures):
            raise ValueError(f"FixSpec {self.id!r}: signatures must be Signature records")
        if not isinstance(self.effect, Effect):
            raise ValueError(f"FixSpec {self.id!r}: effect must be an Effect, got {self.effect!r}")
        if self.effect is Effect.COMPILED and KEYED_CACHE_MODULE not in self.triggers:
            raise ValueError(
                f"FixSpec {self.id!r}: a fix of effect 'compiled' keys the compile caches, so it lists "
                f"{KEYED_CACHE_MODULE} among its triggers"
            )
        if self.reproduction is not None and not isinstance(self.reproduction, Reproduction):
            raise ValueError(f"FixSpec {self.id!r}: reproduction must be a Reproduction record")
        stray = sorted(set(self.unversioned) - set(self.targets))
        if stray:
            raise ValueError(f"FixSpec {self.id!r}: unversioned names libraries that are not in targets: {stray}")
        normalized = {
            "targets": dict(self.targets),
            "triggers": tuple(self.triggers),
            "order": int(self.order),
            "after": tuple(self.after),
            "upstream": tuple(self.upstream),
            "switches": tuple(self.switches),
            "signatures": tuple(self.signatures),
            "unversioned": tuple(self.unversioned),
        }
        for name, value in normalized.items():
            object.__setattr__(self, name, value)  # frozen: the one place that sets a field


def lazy_version(package: str) -> Callable[[str], str]:
    """A module-level ``__getattr__`` for a fix package's ``__init__`` that reads ``__version__``
    from ``<package>.version`` on first use.

    A fix package is imported at ``import torch`` (its ``package`` module is the entry point), where
    every module costs; with ``__getattr__ = lazy_version(__name__)`` its ``__init__`` imports
    nothing else. Any other missing attribute raises :class:`AttributeError` as usual.
    """

    def __getattr__(name: str) -> str:
        if name == "__version__":
            import importlib

            return str(importlib.import_module(f"{package}.version").__version__)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
