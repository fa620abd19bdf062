"""Coverage-guided fuzzing of fusebind's front door with atheris.

Feeds arbitrary bytes (decoded as UTF-8 with replacement) to
`fusebind.dialect.parse_module` and to the `fusebind-opt` driver in process.
The contract: parse_module succeeds or raises a `FusebindIRError` subclass;
the driver returns 0 or 1 and never prints a traceback or an internal error.
Anything else is a crash: atheris saves the input as `crash-<sha1>` in the
working directory; copy it to `test/reliability/corpus/` so pytest replays it.

Run (bounded):  python fuzz/fuzz_parser.py -max_total_time=300 [corpus_dir ...]
Seeds: test/reliability/corpus, examples/ and test/lit are good starting dirs.
Without atheris installed it prints how to get it and exits 0.
"""

from __future__ import annotations

import io
import sys


def check_one(data: bytes) -> None:
    """The front-door contract for one input; raises on a violation."""
    from fusebind.tools.opt import run_opt
    from fusebind.dialect import FusebindIRError, parse_module

    text = data.decode("utf-8", errors="replace")
    try:
        parse_module(text)
    except FusebindIRError:
        pass
    out, err = io.StringIO(), io.StringIO()
    code = run_opt(["-"], io.StringIO(text), out, err)
    diagnostics = err.getvalue()
    if code not in (0, 1) or "Traceback (most recent call last)" in diagnostics or "internal error" in diagnostics:
        raise RuntimeError(f"fusebind-opt broke its contract (exit {code}): {diagnostics[:500]}")


def main(argv: list[str]) -> int:
    try:
        import atheris
    except ImportError:
        print("fuzz_parser: atheris is not installed (pip install atheris); skipping", file=sys.stderr)
        return 0
    with atheris.instrument_imports(include=["fusebind", "xdsl"]):
        import fusebind.tools.opt  # noqa: F401
        import fusebind.dialect  # noqa: F401
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    atheris.Setup(argv, check_one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
