import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
