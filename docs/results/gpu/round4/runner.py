"""Run all round-4 jobs for the torch on PYTHONPATH, several at once; one log + one JSONL out.

Usage: python runner.py OUTDIR TAG [JOBS...]   (JOBS like rand4x mixorder drift cgt:base ...)
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
OUT, TAG = sys.argv[1], sys.argv[2]
ALL = [
    "env",
    "drift:base",
    "drift:no_dsr",
    "drift:deterministic",
    "mixorder",
    "rand4x",
    "cgt:base",
    "cgt:patched",
    "cgt:default_mode",
    "cgt:no_ckpt",
    "cgt:eager",
    "streams:base",
    "streams:patched",
]
JOBS = sys.argv[3:] or ALL
PAR = int(os.environ.get("R4_PAR", "11"))
TIMEOUT = int(os.environ.get("R4_TIMEOUT", "400"))
os.makedirs(OUT, exist_ok=True)
t00 = time.time()


def run(job):
    case, _, var = job.partition(":")
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="r4ind-"),
        TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="r4tri-"),
        TORCHINDUCTOR_COMPILE_THREADS="2",
    )
    t0 = time.time()
    try:
        p = subprocess.run(
            [sys.executable, os.path.join(HERE, "r4.py"), case] + ([var] if var else []),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=env,
        )
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        so = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        se = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    return job, rc, round(time.time() - t0, 1), so, se


with ThreadPoolExecutor(PAR) as ex:
    results = list(ex.map(run, JOBS))

with open(os.path.join(OUT, f"r4-{TAG}.log"), "w") as log, open(os.path.join(OUT, f"r4-{TAG}.jsonl"), "w") as jl:
    for job, rc, dt, so, se in results:
        log.write(f"===== job {job} rc={rc} wall={dt}s =====\n--- stdout\n{so}\n--- stderr (tail)\n{se[-6000:]}\n")
        for line in so.splitlines():
            if line.startswith("{"):
                jl.write(line + "\n")
        print(f"## {job} rc={rc} {dt}s")
        for line in so.splitlines():
            if line.startswith("{"):
                try:
                    d = json.loads(line)
                    d.pop("tb", None)
                    d.pop("torch", None)
                    d.pop("case", None)
                    print("  ", json.dumps(d)[:700])
                except Exception:
                    print("  ", line[:300])
        if rc != 0:
            print("   stderr:", se[-800:].replace("\n", " | "))
print(f"total {round(time.time() - t00, 1)}s")
