"""A pickled function with an in-place matmul epilogue carries its in-place kernel variant:
the receiver runs the variant without compiling it (no `import mlir`).

Regression: the variant memo was per process, so the pickling replay (travel.py, a recording
object cache) found it memoised, never built it through the recording cache, and the pickle
lacked it; the receiver compiled it again, importing mlir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import cloudpickle
import numpy as np

import fusebind as fb

CHILD = textwrap.dedent('''
    import json, pickle, sys
    import numpy as np
    d = sys.argv[1]
    with open(d + "/f.pkl", "rb") as fh:
        f = pickle.load(fh)
    args = [np.load(d + f"/a{i}.npy") for i in range(3)]
    r = f(*args)
    print(json.dumps({"mlir": "mlir" in sys.modules, "variant": "(its in-place kernel variant)" in f.explain(*args),
                      "value": r.tobytes().hex()}))
''')


def test_a_pickled_epilogue_carries_its_variant(tmp_path) -> None:
    rng = np.random.default_rng(11)
    args = [rng.standard_normal(s, dtype=np.float32) for s in ((24, 16), (16, 40), (40,))]
    f = fb.jit(lambda x, w, b: fb.relu(x @ w + b), threads=1)
    want = f(*args)  # planned (and its variant built and memoised) before it is pickled
    assert "(its in-place kernel variant)" in f.explain(*args)
    (tmp_path / "f.pkl").write_bytes(cloudpickle.dumps(f))
    for i, a in enumerate(args):
        np.save(tmp_path / f"a{i}.npy", a)
    env = dict(os.environ, FUSEBIND_CACHE_DIR=str(tmp_path / "child-cache"), FUSEBIND_MACHINE="default",
               FUSEBIND_STRICT="1")
    run = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got == {"mlir": False, "variant": True, "value": want.tobytes().hex()}
