# lit configuration for fusebind's IR tests.
# RUN lines use `fusebind-opt`, `filecheck` and `%python`; all resolve to the
# interpreter's environment that runs lit, so a venv needs no activation.
import os
import sys

import lit.formats

config.name = "fusebind"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "lit.local.cfg", "opt_server.py"]
config.test_source_root = os.path.dirname(__file__)

bindir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bindir, config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%python", sys.executable))
for var in ("HOME", "XDG_CACHE_HOME", "FUSEBIND_CACHE_DIR", "FUSEBIND_CACHE", "FUSEBIND_MACHINE", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]


def _fork_server_shim():
    """A directory holding a `fusebind-opt` that runs through opt_server.py's fork server (one import
    of fusebind for the whole lit run instead of one per RUN line), or None where it cannot start;
    FUSEBIND_LIT_FORK_SERVER=0 turns it off. The server ends with this process."""
    import atexit
    import shutil
    import subprocess
    import tempfile

    real = os.path.join(bindir, "fusebind-opt")
    if os.environ.get("FUSEBIND_LIT_FORK_SERVER", "1") == "0" or not os.path.exists(real) or os.name != "posix":
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    directory = tempfile.mkdtemp(prefix="fb-lit-")
    env = dict(config.environment)  # (exactly what the RUN lines get: lit passes only these)
    server = subprocess.Popen([sys.executable, os.path.join(here, "opt_server.py"), directory], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def stop():
        server.terminate()  # (SIGTERM: it ends after waiting for its children, so their CPU is counted)
        server.wait()
        shutil.rmtree(directory, ignore_errors=True)
    atexit.register(stop)
    if server.stdout.readline().strip() != "ready":
        return None
    shim = os.path.join(directory, "bin")
    os.mkdir(shim)
    with open(os.path.join(shim, "fusebind-opt"), "w") as f:
        f.write(f"#!{sys.executable} -SE\nimport sys\nsys.path.insert(0, {here!r})\nimport opt_server\n"
                f"opt_server.client({directory!r}, {real!r}, {sys.executable!r})\n")
    os.chmod(os.path.join(shim, "fusebind-opt"), 0o755)
    return shim


_shim = _fork_server_shim()
if _shim is not None:
    config.environment["PATH"] = os.pathsep.join([_shim, config.environment["PATH"]])
