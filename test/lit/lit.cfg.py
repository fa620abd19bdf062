# lit configuration for fusebind's IR tests.
# RUN lines use `fusebind-opt`, `filecheck` and `%python`; all resolve to the
# interpreter's environment that runs lit, so a venv needs no activation.
import os
import sys

import lit.formats

config.name = "fusebind"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "lit.local.cfg"]
config.test_source_root = os.path.dirname(__file__)

bindir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bindir, config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%python", sys.executable))
for var in ("HOME", "XDG_CACHE_HOME", "FUSEBIND_CACHE_DIR", "FUSEBIND_CACHE", "FUSEBIND_MACHINE", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
