"""One MagiCompiler AOT scenario in a fresh interpreter (``python _magi_aot_driver.py``, no arguments:
Magi's ``CompileConfig`` parses ``sys.argv``). The scenario comes as JSON in ``TFTEST_MAGI_AOT``::

    {"model": "plain" | "graph_break" | "user_error", "inject": null | "assertion" | "oom" | "interrupt",
     "assert_cache_hit": false, "second_model": false}

``inject`` raises that exception inside Magi's own backend (``MagiBackend._split_graph``), i.e. inside
the real torch AOT compile that Magi's ``aot_compile`` step runs. The last stdout line is a JSON report.
"""

from __future__ import annotations

import json
import os
import traceback

import torch

CONFIG = json.loads(os.environ.get("TFTEST_MAGI_AOT", "{}"))


class Plain(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x))


class GraphBreak(Plain):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        torch._dynamo.graph_break()
        return torch.relu(y)


class UserError(Plain):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("raised by the model itself")


MODELS = {"plain": Plain, "graph_break": GraphBreak, "user_error": UserError}


def _inject(kind: str) -> None:
    from magi_compiler.magi_backend import magi_backend

    errors = {
        "assertion": lambda: AssertionError("injected: backend assertion"),
        "oom": lambda: torch.OutOfMemoryError("injected: CUDA out of memory. Tried to allocate 2.00 GiB"),
        "interrupt": lambda: KeyboardInterrupt(),
    }
    original = magi_backend.MagiBackend._split_graph

    def _split_graph(self, graph):  # type: ignore[no-untyped-def]
        raise errors[kind]()

    _split_graph.__wrapped__ = original  # type: ignore[attr-defined]
    magi_backend.MagiBackend._split_graph = _split_graph


def _config_patch(config):  # type: ignore[no-untyped-def]
    config.aot = True
    config.backend = "eager"  # Magi's eager backend: the AOT path is the same, no C++ compile
    if CONFIG.get("assert_cache_hit"):
        # Newer Magi has CompileConfig.assert_cache_hit (MAGI_COMPILE_ASSERT_CACHE_HIT); 8e2e47c does
        # not: a subclass with that field stands for it.
        from magi_compiler.config import CompileConfig

        class WithAssertCacheHit(CompileConfig):
            assert_cache_hit: bool = True

        return WithAssertCacheHit.model_validate(config.model_dump())
    return config


def main() -> None:
    from magi_compiler import magi_compile

    if CONFIG.get("inject"):
        _inject(CONFIG["inject"])
    torch.manual_seed(0)
    cls = MODELS[CONFIG.get("model", "plain")]
    model = magi_compile(cls(), dynamic_arg_dims={"x": 0}, config_patch=_config_patch)
    other = magi_compile(Plain(), dynamic_arg_dims={"x": 0}, config_patch=_config_patch, model_tag="Other")
    x = torch.randn(4, 8)
    report: dict[str, object] = {"torch": torch.__version__, "error": None, "error_type": None}
    try:
        out = model(x)
        report["ok"] = bool(torch.allclose(out, torch.relu(model.lin(x))))
    except BaseException as exc:  # noqa: BLE001 - the report says what propagated
        report["ok"] = False
        report["error_type"] = f"{type(exc).__module__}.{type(exc).__qualname__}"
        report["error"] = (str(exc).strip().splitlines() or [""])[0][:300]
        report["traceback"] = traceback.format_exc()  # the text Python prints (signature tests)
    state = getattr(model, "_magi_state_for_forward", None)
    report["state_aot"] = getattr(getattr(state, "compile_config", None), "aot", None)
    report["state_jit_code"] = getattr(state, "jit_compiled_code", None) is not None
    report["other_state_aot_before_call"] = (
        other._magi_state_for_forward.compile_config.aot if hasattr(other, "_magi_state_for_forward") else None
    )
    if CONFIG.get("second_model") and report["ok"]:
        out2 = other(x)
        report["other_ok"] = bool(torch.allclose(out2, torch.relu(other.lin(x))))
        report["other_state_aot"] = other._magi_state_for_forward.compile_config.aot
    try:
        import torchfix_core

        report["states"] = {r.id: r.state for r in torchfix_core.status()}
        report["reasons"] = {r.id: r.reason for r in torchfix_core.status()}
        from torchfix_aot_fallback import magi
        from torchfix_aot_fallback.api import fallbacks

        report["magi_fallbacks"] = [r.cause for r in magi.records()]
        report["torch_fallbacks"] = [r.cause for r in fallbacks()]
        from torchfix_core.testing import report_of

        report["report"] = report_of("magi-aot-fallback")
        report["torch_report"] = report_of("aot-fallback")
    except ImportError:
        pass
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
