"""Wall time of the static conformance suite (``nox -s typetests``), cold and warm.

contract §9 asks for the whole static suite, both checkers, in well under a minute on 2 cores
with a warm cache. This times ``python -m nox -s typetests`` twice:

* **cold**: mypy's cache empty. The suite keeps its mypy cache under the system temporary
  folder, so the cold run gets a fresh, empty ``TMPDIR`` (nothing of anyone else's is
  deleted);
* **warm**: the same again, with the cache the cold run left.

Both reuse one virtualenv that an untimed ``--install-only`` run prepared first, in a
directory of its own (``.nox/bench-static``), so that neither creating it nor a developer's
concurrent ``nox -s typetests`` in ``.nox`` gets in the way. If the session does not exist
(yet), this says so and moves on. Run with ``python benchmarks/bench_static_suite.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness
from _harness import Check

ROOT = Path(__file__).resolve().parent.parent
SESSION = "typetests"
TIMEOUT = 420.0
WARM_LIMIT = 60.0


def _nox(*args: str) -> list[str]:
    return [sys.executable, "-m", "nox", "--noxfile", str(ROOT / "noxfile.py"), *args]


def _child_env(tmpdir: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # Run as from a plain shell, not from inside the bench session's virtualenv.
    env.pop("VIRTUAL_ENV", None)
    env["NO_COLOR"] = "1"
    if tmpdir is not None:
        env["TMPDIR"] = tmpdir
    return env


def session_present() -> tuple[bool, str]:
    """Whether the noxfile defines ``typetests``, and why not if it does not."""
    try:
        listed = subprocess.run(
            _nox("-l"),
            cwd=ROOT,
            env=_child_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, f"cannot list nox sessions ({error})"
    if listed.returncode != 0:
        tail = (listed.stderr or listed.stdout).strip().splitlines()[-1:] or ["?"]
        return False, f"nox -l failed: {tail[0]}"
    pattern = re.compile(rf"^[*-] {SESSION}(-[\d.]+)?\b", re.MULTILINE)
    if not pattern.search(listed.stdout):
        return False, f"{SESSION} session not present"
    return True, ""


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """(seconds, exit code, last lines of output) of one nox run."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            args,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, -1, f"timed out after {TIMEOUT:.0f} s"
    elapsed = time.perf_counter() - start
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    summary = [line for line in lines if re.search(r"\d+ (passed|failed|error)", line)]
    return elapsed, done.returncode, (summary or lines or ["(no output)"])[-1].strip()


def run(*, quick: bool = False) -> list[Check]:
    label = f"static suite warm wall time (contract §9: well under {WARM_LIMIT:.0f} s)"
    print("\n[e] static conformance suite: python -m nox -s typetests")
    if quick:
        print("  skipped (--quick)")
        return [Check(label, None, WARM_LIMIT, "s", "skipped (--quick)")]
    present, why = session_present()
    if not present:
        print(f"  {why}; skipped")
        return [Check(label, None, WARM_LIMIT, "s", why)]
    envdir = str(ROOT / ".nox" / "bench-static")
    reuse = ["-s", SESSION, "--envdir", envdir, "--reuse-venv", "yes"]
    prepare, code, tail = _timed(_nox(*reuse, "--install-only"), _child_env())
    print(f"  prepare (virtualenv + install, untimed for the figures): {prepare:.1f} s, rc={code}")
    if code != 0:
        print(f"  could not prepare the session: {tail}")
        return [Check(label, None, WARM_LIMIT, "s", f"install failed: {tail}")]
    cache_home = tempfile.mkdtemp(prefix="toolseam-bench-static-")
    try:
        cold, cold_code, cold_tail = _timed(_nox(*reuse), _child_env(cache_home))
        print(f"  cold (empty mypy cache): {cold:6.1f} s  rc={cold_code}  {cold_tail}")
        warm, warm_code, warm_tail = _timed(_nox(*reuse), _child_env(cache_home))
        print(f"  warm (cache of the cold run): {warm:6.1f} s  rc={warm_code}  {warm_tail}")
    finally:
        shutil.rmtree(cache_home, ignore_errors=True)
    detail = f"cold {cold:.1f} s"
    if cold_code or warm_code:
        detail += f"; the session failed (rc {cold_code}/{warm_code}): {warm_tail}"
    return [Check(label, warm, WARM_LIMIT, "s", detail)]


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0]).parse_args()
    print(_harness.machine_summary())
    checks = run(quick=options.quick)
    print()
    _harness.print_checks(checks)


if __name__ == "__main__":
    main()
