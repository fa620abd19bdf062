"""A fork server for the lit suite's `fusebind-opt` runs (lit.cfg.py starts one per lit run).

Why: the lit files run `fusebind-opt` about 120 times, and each fresh interpreter spends ~1.9 s of
CPU importing xdsl and fusebind before it reads its input (measured on this host): most of the
suite's lit time. The server imports `fusebind.tools.opt` once; each run is a process forked from
it that takes the caller's stdin/stdout/stderr (passed over a unix socket), its cwd, argv and
environment, runs the same `main()` the console script runs, and exits with its code (or dies by
its signal, which the client repeats). Every run is still its own process (nothing leaks from one
to the next); only the import is shared.

The client (the `fusebind-opt` shim lit finds first on PATH) runs the real console script instead
whenever the server cannot answer or the caller's environment differs from the server's in a
variable read at import time (FUSEBIND_*, PYTHON*, LANG, LC_*): e.g. `env PYTHONPATH=... fusebind-opt`.
Only the standard library is imported at module level: the client runs under `python -SE`.
"""

from __future__ import annotations

import array
import json
import os
import select
import signal
import socket
import struct
import sys

_FDS = 3  # stdin, stdout, stderr


def _import_env(env: dict[str, str]) -> dict[str, str]:
    """The variables that can change what an import does (compared between server and client)."""
    return {k: v for k, v in env.items()
            if (k.startswith(("FUSEBIND_", "PYTHON", "LC_")) or k == "LANG") and not k.startswith("FUSEBIND_LIT_OPT")}


def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    chunks, size = [], None
    while True:
        data, anc, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(_FDS * fds.itemsize))
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        if not data:
            raise ConnectionError("the client closed the connection before its request was complete")
        chunks.append(data)
        raw = b"".join(chunks)
        if size is None and len(raw) >= 8:
            size = struct.unpack("<Q", raw[:8])[0]
        if size is not None and len(raw) >= 8 + size:
            return json.loads(raw[8:8 + size]), list(fds)


def _run(request: dict, fds: list[int]) -> None:
    """In the forked grandchild: become the requested `fusebind-opt` run, then exit with its code."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [request["argv0"], *request["argv"]]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from fusebind.tools.opt import main

    try:
        code = main()
    except SystemExit as stop:  # (argparse's usage errors) as the interpreter would report them
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if stop.code is not None and not isinstance(stop.code, int):
            sys.stderr.write(f"{stop.code}\n")
    import atexit

    atexit._run_exitfuncs()  # (as the interpreter's exit would: the handlers fusebind's import registered)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # (the interpreter's code when flushing stdout at exit fails)
    os._exit(code if isinstance(code, int) else 1)


def _serve_one(conn: socket.socket) -> None:
    """In the forked child: read the request, fork the run, report its wait status to the client."""
    request, fds = _recv_request(conn)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run(request, fds)
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    conn.sendall(struct.pack("<i", status))


def _reap() -> None:
    """Wait for the finished per-connection children (so their CPU time is counted: the lit process
    that ends this server reaps it, and `time` of a lit run shows every run's CPU)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _finish(*_: object) -> None:
    """SIGTERM: wait for every child, then end."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)


def serve(directory: str) -> None:
    """Listen on `directory`/sock; print "ready" once the import is done; end when the parent does."""
    import fusebind.tools.opt  # noqa: F401 - the shared import (the point of the server)

    parent = os.getppid()
    path = os.path.join(directory, "sock")
    with open(os.path.join(directory, "env.json"), "w") as f:
        json.dump(_import_env(dict(os.environ)), f)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    signal.signal(signal.SIGTERM, _finish)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while os.getppid() == parent:
        _reap()
        if not select.select([listener], [], [], 0.5)[0]:
            continue
        conn, _ = listener.accept()
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            try:
                _serve_one(conn)
            finally:
                os._exit(0)
        conn.close()


def client(directory: str, real_script: str, real_python: str) -> None:
    """The shim's body: run `fusebind-opt argv` through the server, or the real script."""
    argv = sys.argv[1:]
    try:
        with open(os.path.join(directory, "env.json")) as f:
            same_env = json.load(f) == _import_env(dict(os.environ))
        if not same_env:
            raise LookupError("the environment differs from the server's")
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(os.path.join(directory, "sock"))
        body = json.dumps({"argv0": real_script, "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        message = struct.pack("<Q", len(body)) + body
        conn.sendmsg([message[:1]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", range(_FDS)))])
        conn.sendall(message[1:])
    except (OSError, ValueError, LookupError):  # (nothing ran yet: the real script answers instead)
        os.execv(real_python, [real_python, real_script, *argv])
    raw = b""
    while len(raw) < 4:
        chunk = conn.recv(4 - len(raw))
        if not chunk:
            sys.stderr.write("fusebind-opt (lit fork server): the server closed the connection\n")
            os._exit(125)
        raw += chunk
    status = struct.unpack("<i", raw)[0]
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    serve(sys.argv[1])
