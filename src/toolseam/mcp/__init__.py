"""toolseam.mcp: serve a `ToolRegistry` over MCP, use MCP servers' tools, and a gateway.

Needs the optional ``mcp`` extra (``pip install "toolseam[mcp]"``); ``import toolseam`` never
imports it. See ``docs/mcp.md``.

- Server: `serve_stdio` and `serve_http` (or ``python -m toolseam.mcp serve MODULE:ATTR
  [--http [HOST:]PORT]``), and `create_server` for other transports. A client's
  cancellation (``notifications/cancelled``, or closing the request's stream) and a client
  going away abort the call's signal; the body is awaited before the request settles. A
  body's ``exec.progress``/``log``/``elicit``/``sample`` reach the client of the call.
- Client: `register_mcp_tools` registers every tool of a ``mcp.ClientSession`` as a
  `McpToolDefinition`, whose body forwards ``exec.signal`` as an MCP cancellation, and the
  server's progress as ``exec.progress``; with `SessionCallbacks`, its log messages,
  elicitation and sampling requests reach the call's ``exec.log``/``elicit``/``sample``;
  with `TasksExtension` on the session's ``Client``, a 2026-07-28 server's tasks are followed.
- Who may call over HTTP: `HttpAuth` with `StaticTokens` or `JwtTokens` (an OAuth 2.1
  resource server on the SDK's pieces), and `HttpLimits`; see `serve_http`.
- Gateway: `mount_upstreams` (or ``python -m toolseam.mcp gateway --upstream NAME=...``)
  registers the tools of several MCP servers in one registry, each under ``NAME_``.
"""

import importlib.util as _importlib_util

if _importlib_util.find_spec("mcp") is None:  # pragma: no cover - only without the extra
    import sys as _sys

    _MISSING = 'toolseam.mcp needs the MCP SDK: pip install "toolseam[mcp]"'
    if _sys.argv[:1] == ["-m"] and "toolseam.mcp" in _sys.orig_argv:
        # `python -m toolseam.mcp` is importing this package to run its __main__: one
        # line saying how to install the extra, not a traceback.
        raise SystemExit(_MISSING)
    raise ImportError(_MISSING)

from .._util import fixup_module_metadata as _fixup_module_metadata
from ._auth import ClientCredentials as ClientCredentials
from ._auth import HttpAuth as HttpAuth
from ._auth import HttpLimits as HttpLimits
from ._auth import JwtTokens as JwtTokens
from ._auth import StaticTokens as StaticTokens
from ._client import REMOTE_TOOL_ERROR as REMOTE_TOOL_ERROR
from ._client import McpToolDefinition as McpToolDefinition
from ._client import RemoteToolError as RemoteToolError
from ._client import register_mcp_tools as register_mcp_tools
from ._client_tasks import TasksExtension as TasksExtension
from ._gateway import mount_upstreams as mount_upstreams
from ._http import MCP_PATH as MCP_PATH
from ._http import serve_http as serve_http
from ._relay import SessionCallbacks as SessionCallbacks
from ._relay import SessionKwargs as SessionKwargs
from ._server import create_server as create_server
from ._server import serve_stdio as serve_stdio
from ._tasks import TaskSupport as TaskSupport
from ._wire import CODE_META_KEY as CODE_META_KEY
from ._wire import call_tool_result as call_tool_result

__all__ = (
    "CODE_META_KEY",
    "MCP_PATH",
    "REMOTE_TOOL_ERROR",
    "ClientCredentials",
    "HttpAuth",
    "HttpLimits",
    "JwtTokens",
    "McpToolDefinition",
    "RemoteToolError",
    "SessionCallbacks",
    "SessionKwargs",
    "StaticTokens",
    "TaskSupport",
    "TasksExtension",
    "call_tool_result",
    "create_server",
    "mount_upstreams",
    "register_mcp_tools",
    "serve_http",
    "serve_stdio",
)

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata, _importlib_util
