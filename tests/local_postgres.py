"""A throwaway Postgres server on loopback, for the Postgres tests and benchmarks.

`find_binaries` looks for ``initdb`` and ``pg_ctl`` (``$TOOLSEAM_PG_BIN``, then ``PATH``,
then Debian's ``/usr/lib/postgresql/<version>/bin``); `LocalPostgres` runs ``initdb`` in a
fresh temporary folder and ``pg_ctl start`` on a free loopback port, and removes both when
stopped. Postgres refuses to run as root: as root, the server runs as the ``postgres`` user
when there is one (Debian's package creates it), else as a system user this module creates
(``toolseam-pg``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["LocalPostgres", "find_binaries", "missing_reason"]

_SERVICE_USER = "toolseam-pg"


def find_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or ``None``."""
    candidates: list[str] = []
    if os.environ.get("TOOLSEAM_PG_BIN"):
        candidates.append(os.environ["TOOLSEAM_PG_BIN"])
    initdb = shutil.which("initdb")
    if initdb is not None:
        candidates.append(str(Path(initdb).resolve().parent))
    candidates.extend(
        sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    )
    for folder in candidates:
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


def _version_key(folder: str) -> tuple[int, ...]:
    version = Path(folder).parent.name
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def missing_reason() -> str:
    return (
        "no Postgres server binaries (initdb, pg_ctl) on PATH, in $TOOLSEAM_PG_BIN or in "
        "/usr/lib/postgresql/*/bin: install them (Debian: apt-get install -y postgresql)"
    )


def _service_user() -> str | None:
    """Whom to run the server as: ``None`` for the current (non-root) user."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", _SERVICE_USER):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", _SERVICE_USER],
        check=True,
    )
    return _SERVICE_USER


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalPostgres:
    """One Postgres server in a temporary folder. `start` it; `stop` removes everything.

    Args:
        binaries: The folder of ``initdb`` and ``pg_ctl`` (`find_binaries`).
    """

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        self.user = _service_user()
        self.folder = Path(tempfile.mkdtemp(prefix="toolseam-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()

    @property
    def url(self) -> str:
        """A SQLAlchemy URL of the ``toolseam`` database (DBOS creates it when missing)."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/toolseam"

    def _run(self, *command: str) -> None:
        completed = subprocess.run(
            [str(self.binaries / command[0]), *command[1:]],
            user=self.user,
            capture_output=True,
            text=True,
            check=False,
        )
        if completed.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{command[0]} failed ({completed.returncode}):\n{completed.stdout}\n"
                f"{completed.stderr}\n{tail}"
            )

    def start(self) -> LocalPostgres:
        """``initdb`` (first time only) and ``pg_ctl start``; returns once it accepts."""
        if self.user is not None:
            shutil.chown(self.folder, user=self.user)
        if not self.data.exists():
            self._run(
                "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                "--encoding=UTF8", "--no-sync",
            )  # fmt: skip
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} "
            "-c fsync=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "server.log"),
            "-w", "-t", "60", "start",
        )  # fmt: skip
        return self

    def halt(self) -> None:
        """Stop the server, keeping its data (`start` brings it back on the same port)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        with contextlib.suppress(RuntimeError):  # not running
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)
