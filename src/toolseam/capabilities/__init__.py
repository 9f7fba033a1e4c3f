"""toolseam.capabilities: side effects a tool body owns, each stopped by the call's signal.

The contract puts the termination of a side effect at the layer that owns it (contract §5,
quiescence): an abort asks the body to stop, and the process or network layer stops its own
work. These helpers are those layers for the side effects tools write most. Each takes the
call's signal as a required keyword argument — there is no default and no "never aborting"
signal — and returns or raises only once what it started has stopped:

- `run_process` runs a program in its own process group; an abort sends SIGTERM to the
  group and SIGKILL after a grace period, and no process of the group outlives the call.
- `http_request` and `http_stream` send an httpx request; an abort cancels the network
  operation in flight and closes its connection. They need the ``http`` extra
  (``pip install "toolseam[http]"``): httpx is imported when one of them is first used,
  so ``import toolseam.capabilities`` works without it.

See ``docs/capabilities.md``.
"""

import typing as _typing

from .._util import fixup_module_metadata as _fixup_module_metadata
from ._process import DEFAULT_GRACE as DEFAULT_GRACE
from ._process import DEFAULT_MAX_OUTPUT as DEFAULT_MAX_OUTPUT
from ._process import PROCESS_FAILED as PROCESS_FAILED
from ._process import ProcessFailedError as ProcessFailedError
from ._process import ProcessResult as ProcessResult
from ._process import run_process as run_process

if _typing.TYPE_CHECKING:
    from ._http import http_request as http_request
    from ._http import http_stream as http_stream

__all__ = (
    "DEFAULT_GRACE",
    "DEFAULT_MAX_OUTPUT",
    "PROCESS_FAILED",
    "ProcessFailedError",
    "ProcessResult",
    "http_request",
    "http_stream",
    "run_process",
)

_HTTP_NAMES = frozenset({"http_request", "http_stream"})


def __getattr__(name: str) -> object:
    # PEP 562: the HTTP helpers import httpx, the `http` extra, on first use only.
    if name not in _HTTP_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from . import _http
    except ModuleNotFoundError as error:
        if error.name != "httpx":
            raise
        raise ImportError(
            f'toolseam.capabilities.{name} needs httpx: pip install "toolseam[http]"'
        ) from error
    helpers = {n: getattr(_http, n) for n in _HTTP_NAMES}
    _fixup_module_metadata(__name__, helpers)
    globals().update(helpers)
    return helpers[name]


_fixup_module_metadata(__name__, globals())
