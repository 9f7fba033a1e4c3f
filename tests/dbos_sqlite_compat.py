"""Lets DBOS 3.4 use SQLite on Python 3.12+ when Python's SQLite is older than 3.42.

On Python 3.12 and later DBOS stamps its rows with ``unixepoch('subsec')`` (in its schema's
column defaults and in its queries), a modifier SQLite has only since 3.42; an older SQLite
returns NULL there and DBOS fails at launch (``NOT NULL constraint failed:
application_versions.version_timestamp``). Debian 12's SQLite is 3.40, and so is that of the
CPythons built on it, as on this project's machines. `install` makes every SQLite connection
SQLAlchemy opens in this process answer ``unixepoch`` in Python instead (an
application-defined function overrides SQLite's built-in of the same name). It does nothing
where it is not needed. Import it in every test process that runs DBOS on SQLite.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

__all__ = ["install"]

_installed = False


def _unixepoch(*args: object) -> float | int:
    if args == ("subsec",):
        return time.time()
    if not args:
        return int(time.time())
    raise sqlite3.ProgrammingError(f"unixepoch{args!r}: only the forms DBOS uses are supported")


def _on_connect(dbapi_connection: Any, connection_record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.create_function("unixepoch", -1, _unixepoch)


def install() -> None:
    """Install the fallback, once, where Python >= 3.12 meets SQLite < 3.42."""
    global _installed
    if _installed or sys.version_info < (3, 12) or sqlite3.sqlite_version_info >= (3, 42):
        return
    event.listen(Engine, "connect", _on_connect)
    _installed = True
