"""Investigated bugs without a torchfix fix (docs/investigated.md): what explain can still name.

Data only, in the catalog's form (the fields of :class:`torchfix_core.spec.Signature` as dicts):
each entry has the upstream links, the workaround users have, and the signatures seen in the red
runs recorded in docs/investigated.md. A silent bug has its symptom only (nothing to match in a
log). A test checks every entry has a section in docs/investigated.md and that every pattern
compiles and claims none of the unrelated errors of the no-false-claims corpus.
"""

from __future__ import annotations

KNOWN_BUGS: tuple[dict, ...] = (  # type: ignore[type-arg]
    {
        "id": "act-recompile",
        "summary": "AsyncCollectiveTensor and plain Tensor inputs recompile the same graph until the recompile limit "
        "(FSDP/TP prefetch timing)",
        "upstream": (
            "https://github.com/pytorch/pytorch/issues/187073",
            "https://github.com/pytorch/pytorch/pull/189482",
        ),
        "workaround": "raise torch._dynamo.config.recompile_limit (and accumulated_recompile_limit), or wait on "
        "collectives before the compiled region (AsyncCollectiveTensor.wait())",
        "signatures": (
            {
                "exception": "FailOnRecompileLimitHit",
                "message": r"Hard failure due to fullgraph=True|recompile_limit reached with fullgraph=True",
                "context": r"last reason: .*AsyncCollectiveTensor",
                "when": "Dynamo's recompile reason (logged before the traceback) names an AsyncCollectiveTensor input",
                "releases": "torch >=2.10,<2.16",
            },
        ),
    },
    {
        "id": "aot-stale-guards",
        "summary": "a compile-cache hit replays another source version's shape guards",
        "upstream": ("https://github.com/pytorch/pytorch/issues/194001",),
        "workaround": "a fresh cache directory after the edit, or torch.compiler.config.force_disable_caches = True",
        "signatures": (
            {
                "exception": "ConstraintViolationError",
                "message": r"Constraints violated \(L\[",
                "when": "the same program passes with an empty TORCHINDUCTOR_CACHE_DIR (the hit came from an edited "
                "version of the code)",
            },
        ),
    },
    {
        "id": "checkpoint-device-ctx",
        "summary": "a non-reentrant checkpoint's recompute ignores the forward's `with torch.device(...)` (torch <= 2.10)",
        "upstream": (
            "https://github.com/pytorch/pytorch/issues/124788",
            "https://github.com/pytorch/pytorch/pull/172802",
        ),
        "workaround": "upgrade to torch 2.11+, pass device= to factory calls in checkpointed code, or run the "
        "backward inside the same `with torch.device(...)`",
        "signatures": (
            {
                "exception": "CheckpointError",
                "message": r"different metadata than during the forward pass[\s\S]*saved metadata: [^\n]*'device': "
                r"device\(type='(?!cpu)[^']+'\)[^\n]*\nrecomputed metadata: [^\n]*'device': device\(type='cpu'\)",
                "releases": "torch <2.11",
                "when": "the forward ran under `with torch.device(...)`",
            },
        ),
    },
    {
        "id": "cache-rank-sync",
        "summary": "partial AOTAutograd cache hits across ranks with _sync_decision_cross_ranks hang the job",
        "upstream": ("https://github.com/pytorch/pytorch/pull/193043",),
        "workaround": "on 2.15 also set torch._functorch.config._sync_cache_decision_cross_ranks = True; elsewhere give "
        "every rank the same cache state",
        "signatures": ({"symptom": "ranks hang at compile time (collective timeout) when only some hit the cache"},),
    },
    {
        "id": "sac-compile-skip",
        "summary": "compiled code inside a selective-activation-checkpoint region runs eagerly (torch 2.8/2.9)",
        "upstream": ("https://github.com/pytorch/pytorch/issues/161889",),
        "workaround": "upgrade to torch 2.10+, or checkpoint inside the compiled region",
        "signatures": ({"symptom": "no speed-up from torch.compile under SAC; no error, gradients correct"},),
    },
)
