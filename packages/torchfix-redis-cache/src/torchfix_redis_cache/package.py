"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec)."""

from torchfix_core.spec import Effect, FixSpec, Reproduction, Signature

WHEN = (
    "torch's Redis remote caches are on (TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1, TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE=1, "
    "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE=1) and the server answers a write with an error: maxmemory reached "
    "with the noeviction policy, a read-only replica, an ACL user without write permission"
)
#: the traceback passes through the Redis backend's write or read (torch/_inductor/remote_cache.py)
BACKEND_FRAME = r'remote_cache\.py", line \d+, in _(put|get)\b'

FIX = FixSpec(
    id="redis-cache-errors",
    summary=(
        "A Redis server's error answer to a remote-cache write or read (OOM under maxmemory, a read-only "
        "replica, an ACL without write permission) no longer fails torch.compile: the entry is not shared, "
        "as the FX graph cache already does."
    ),
    implementation="torchfix_redis_cache.patch:RedisCacheErrorsFix",
    distribution="torchfix-redis-cache",
    # validated on 2.8.0-2.15.0 (red/green on each); the backend's code is the same on all of them
    # (no upstream fix). redis-py: the client torch's backend drives
    targets={"torch": ">=2.8,<2.16", "redis": ">=5,<9"},
    # the module defining RedisRemoteCacheBackend: imported by AOTAutograd's cache module at the first
    # compile, never by `import torch`
    triggers=("torch._inductor.remote_cache",),
    order=60,
    # only whether a refused write or failed read stops the compile; what torch compiles is unchanged
    effect=Effect.RUNTIME,
    upstream=("https://github.com/pytorch/pytorch/blob/v2.15.0/torch/_functorch/_aot_autograd/autograd_cache.py",),
    # seen in the red runs of tests/_scenarios.py (redis-server 7.0, redis-py 5 and 8) on every release
    # 2.8.0-2.15.0: the error escapes AOTAutogradCache.save through the backend's _put. The context
    # (the backend's frame) keeps a device OOM or a user's own Redis error unclaimed
    signatures=(
        Signature(
            exception="OutOfMemoryError",
            message=r"command not allowed when used memory > 'maxmemory'",
            when=WHEN,
            context=BACKEND_FRAME,
        ),
        Signature(
            exception="ReadOnlyError",
            message=r"You can't write against a read only replica",
            when=WHEN,
            context=BACKEND_FRAME,
        ),
        Signature(
            exception="NoPermissionError",
            message=r"no permissions to run the '(set|get)' command",
            when=WHEN,
            context=BACKEND_FRAME,
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_redis_cache.reproduction:refused_write",
        measure=(
            "the exception a compiled training step raises when a real redis-server refuses every write "
            "(maxmemory 1 byte, noeviction), or its gradient against eager where it runs"
        ),
        libraries={"redis": ">=5"},
        seconds=15,
    ),
)
