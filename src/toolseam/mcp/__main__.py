"""Command line: ``python -m toolseam.mcp serve MODULE:ATTR`` and ``... gateway``."""

from __future__ import annotations

import argparse
import functools
import gc
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from ._auth import ClientCredentials

__all__ = ["main"]

_PROG = "python -m toolseam.mcp"


def _address(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` (``[::1]:8000`` for IPv6) as a host and a port; loopback by default."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected [HOST:]PORT, got {text!r}")
    return host, int(port)


def _upstream(text: str) -> tuple[str, str]:
    name, sep, target = text.partition("=")
    if not sep or not name or not target.strip():
        from ._gateway import redact_userinfo

        shown = redact_userinfo(text)
        raise argparse.ArgumentTypeError(f"expected NAME=URL_OR_COMMAND, got {shown!r}")
    return name, target


def _credential(text: str) -> tuple[str, str]:
    """``NAME=REST``: an upstream's name and the rest (a source, or ``HEADER=SOURCE``)."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        # Not shown: a secret given in place of its source would be printed.
        raise argparse.ArgumentTypeError("expected NAME=... (the value is not shown)")
    return name, rest


def _read_secret(source: str) -> str:
    """A secret from ``env:VAR`` or ``file:PATH`` (stripped); the message never shows it."""
    kind, sep, where = source.partition(":")
    if sep and kind == "env":
        value = os.environ.get(where)
        if value is None:
            raise ValueError(f"environment variable {where} is not set")
        return value.strip()
    if sep and kind == "file":
        try:
            with open(where, encoding="utf-8") as file:
                return file.read().strip()
        except OSError as error:
            raise ValueError(f"{error.strerror}: {where}") from None
    # What was given is not shown: it may be the secret itself.
    raise ValueError("expected env:VAR or file:PATH as the source of a secret (not the secret)")


def _upstream_headers(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """Each upstream's credential headers, from --upstream-bearer and --upstream-header."""
    names = {name for name, _ in args.upstream}
    headers: dict[str, dict[str, str]] = {}
    for name, source in args.upstream_bearer:
        if name not in names:
            raise ValueError(f"--upstream-bearer: no --upstream named {name!r}")
        headers.setdefault(name, {})["Authorization"] = f"Bearer {_read_secret(source)}"
    for name, rest in args.upstream_header:
        header, sep, source = rest.partition("=")
        if name not in names or not sep or not header:
            raise ValueError(f"--upstream-header: expected NAME=HEADER=SOURCE for {name!r}")
        headers.setdefault(name, {})[header] = _read_secret(source)
    return headers


def _upstream_oauth(args: argparse.Namespace) -> dict[str, ClientCredentials]:
    """Each upstream's OAuth client credentials, from --upstream-client-credentials."""
    from ._auth import ClientCredentials

    urls = {name for name, target in args.upstream if target.startswith(("http://", "https://"))}
    found: dict[str, ClientCredentials] = {}
    for name, rest in args.upstream_client_credentials:
        parts = rest.rsplit("=", 2)
        if name not in urls or len(parts) != 3 or not all(parts):
            raise ValueError(
                "--upstream-client-credentials: expected NAME=ISSUER=CLIENT_ID=SOURCE "
                f"for {name!r}, an http(s) --upstream"
            )
        issuer, client_id, source = parts
        found[name] = ClientCredentials(
            issuer=issuer, client_id=client_id, client_secret=_read_secret(source)
        )
    return found


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG, description="Bridge toolseam registries and the Model Context Protocol."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve a ToolRegistry as an MCP server (stdio, or streamable HTTP)",
        description="Serve the ToolRegistry named by MODULE:ATTR as an MCP server: on stdin "
        "and stdout, or with --http over streamable HTTP at http://HOST:PORT/mcp. MODULE is "
        "a dotted module name or a path to a .py file.",
    )
    serve.add_argument("target", metavar="MODULE:ATTR", help="where the ToolRegistry lives")
    gateway = commands.add_parser(
        "gateway",
        help="serve the tools of several MCP servers as one, through one ToolRegistry",
        description="Connect to every upstream MCP server (an http(s) URL, or a command "
        "line to start a stdio server) and serve all their tools as one MCP server, each "
        "under the prefix NAME_, through one ToolRegistry (see --policy).",
    )
    gateway.add_argument(
        "--upstream",
        metavar="NAME=URL_OR_COMMAND",
        type=_upstream,
        action="append",
        required=True,
        help="an upstream server; repeat for each",
    )
    gateway.add_argument(
        "--upstream-bearer",
        metavar="NAME=SOURCE",
        type=_credential,
        action="append",
        default=[],
        help="send an upstream 'Authorization: Bearer TOKEN', the token read from SOURCE: "
        "env:VAR or file:PATH (repeatable; never printed)",
    )
    gateway.add_argument(
        "--upstream-header",
        metavar="NAME=HEADER=SOURCE",
        type=_credential,
        action="append",
        default=[],
        help="send an upstream the header HEADER, its value read from SOURCE: env:VAR or "
        "file:PATH (repeatable; never printed)",
    )
    gateway.add_argument(
        "--upstream-client-credentials",
        metavar="NAME=ISSUER=CLIENT_ID=SOURCE",
        type=_credential,
        action="append",
        default=[],
        help="get an HTTP upstream's access token from the authorization server ISSUER by "
        "OAuth client credentials, the secret read from SOURCE: env:VAR or file:PATH "
        "(repeatable; never printed)",
    )
    gateway.add_argument(
        "--policy",
        metavar="MODULE:ATTR",
        help="a callable that receives the gateway's ToolRegistry (to add guards, "
        "listeners, wrappers, observers), or a ToolRegistry to use as the gateway's",
    )
    for command in (serve, gateway):
        command.add_argument(
            "--http",
            metavar="[HOST:]PORT",
            type=_address,
            help="serve over streamable HTTP (host defaults to 127.0.0.1) instead of stdio",
        )
        _http_options(command)
        command.add_argument("--name", default="toolseam", help="server name (default: toolseam)")
        command.add_argument(
            "--input-deadline",
            metavar="SECONDS",
            type=_positive_float,
            help="how long a call suspended at a question waits for its MCP 2026-07-28 "
            "client's retry before it is aborted (default: 600)",
        )
        command.add_argument(
            "--task",
            metavar="TOOL[=SUPPORT]",
            action="append",
            default=[],
            help="serve TOOL's calls as tasks of the MCP tasks extension (2026-07-28) to "
            "clients that declare it; =required refuses the others, =after-input (required) "
            "asks its first questions before it becomes a task (repeatable)",
        )
        if command is serve:
            command.add_argument(
                "--durable",
                action="store_true",
                help="run each task (--task) as a DBOS workflow that outlives a crash of the "
                "server (recovered when it starts again); the system database's URL is read "
                "from DBOS_SYSTEM_DATABASE_URL (needs --http and toolseam[dbos])",
            )
        command.add_argument(
            "--backend",
            choices=("asyncio", "trio"),
            default="asyncio",
            help="event loop to run on (default: asyncio; --http needs asyncio)",
        )
    return parser


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _http_options(command: argparse.ArgumentParser) -> None:
    """Who may call over --http, and the limits (contract: who may call)."""
    auth = command.add_argument_group("authentication (--http)")
    auth.add_argument(
        "--auth-tokens",
        metavar="FILE",
        help="static bearer tokens: one a line, TOKEN_OR_sha256:HEX PRINCIPAL [SCOPE ...]",
    )
    auth.add_argument(
        "--auth-jwks", metavar="PATH_OR_URL", help="verify JWT access tokens with this JWKS"
    )
    auth.add_argument("--auth-issuer", metavar="ISS", help="the iss a JWT must carry")
    auth.add_argument(
        "--auth-audience",
        metavar="AUD",
        help="the aud a JWT must hold (default: the resource URL)",
    )
    auth.add_argument(
        "--authorization-server",
        metavar="URL",
        action="append",
        default=[],
        help="an authorization server named in the protected-resource metadata (repeatable; "
        "default with --auth-jwks: the issuer)",
    )
    auth.add_argument(
        "--resource-url",
        metavar="URL",
        help="this server's public URL, its resource identifier (default: http(s)://HOST:PORT/mcp)",
    )
    auth.add_argument(
        "--require-scope",
        metavar="SCOPE",
        action="append",
        default=[],
        help="a scope every request needs (repeatable; otherwise 403 insufficient_scope)",
    )
    auth.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve a non-loopback host without authentication (anyone may call every tool)",
    )
    net = command.add_argument_group("network (--http)")
    net.add_argument(
        "--allow-origin",
        metavar="ORIGIN",
        action="append",
        default=[],
        help="an Origin allowed besides loopback ones (repeatable)",
    )
    net.add_argument(
        "--allow-host",
        metavar="HOST",
        action="append",
        default=None,
        help="check Host: a value allowed (repeatable; name or name:port)",
    )
    net.add_argument("--certfile", metavar="PEM", help="serve https with this certificate chain")
    net.add_argument("--keyfile", metavar="PEM", help="the private key of --certfile")
    limits = command.add_argument_group("limits (--http)")
    limits.add_argument("--max-body-bytes", metavar="N", type=_positive_int)
    limits.add_argument("--max-sessions", metavar="N", type=_positive_int)
    limits.add_argument("--max-sessions-per-principal", metavar="N", type=_positive_int)
    limits.add_argument("--session-idle-timeout", metavar="SECONDS", type=_positive_float)
    limits.add_argument("--max-calls-per-principal", metavar="N", type=_positive_int)


def _http_settings(args: argparse.Namespace) -> dict[str, Any]:
    """`serve_http`'s keyword arguments from the command line (raises ValueError)."""
    from ._auth import HttpAuth, HttpLimits, JwtTokens, StaticTokens
    from ._http import MCP_PATH, NO_AUTH_MESSAGE, is_loopback

    host, port = args.http
    tls = args.certfile is not None
    shown = f"[{host}]" if ":" in host else host
    resource: str = args.resource_url or f"{'https' if tls else 'http'}://{shown}:{port}{MCP_PATH}"
    if args.auth_tokens is not None and args.auth_jwks is not None:
        raise ValueError("pass --auth-tokens or --auth-jwks, not both")
    if (args.auth_jwks is None) != (args.auth_issuer is None):
        raise ValueError("--auth-jwks and --auth-issuer go together")
    if (args.certfile is None) != (args.keyfile is None):
        raise ValueError("--certfile and --keyfile go together")
    auth: HttpAuth | None = None
    servers: list[str] = args.authorization_server
    if args.auth_tokens is not None:
        try:
            verifier: Any = StaticTokens.from_file(args.auth_tokens)
        except OSError as error:
            raise ValueError(f"--auth-tokens: {error.strerror}: {args.auth_tokens}") from None
    elif args.auth_jwks is not None:
        try:
            verifier = JwtTokens(
                args.auth_jwks,
                issuer=args.auth_issuer,
                audience=args.auth_audience or resource,
            )
        except OSError as error:
            raise ValueError(f"--auth-jwks: {error.strerror}: {args.auth_jwks}") from None
        servers = servers or [args.auth_issuer]
    else:
        verifier = None
    if verifier is not None:
        auth = HttpAuth(
            verifier=verifier,
            authorization_servers=servers,
            resource_url=resource,
            required_scopes=args.require_scope,
        )
    elif not is_loopback(host) and not args.insecure_no_auth:
        raise ValueError(NO_AUTH_MESSAGE.format(host=host))
    overrides = {
        name: value
        for name in (
            "max_body_bytes",
            "max_sessions",
            "max_sessions_per_principal",
            "session_idle_timeout",
            "max_calls_per_principal",
        )
        if (value := getattr(args, name)) is not None
    }
    return {
        "auth": auth,
        "insecure_no_auth": args.insecure_no_auth,
        "allow_origins": args.allow_origin,
        "allow_hosts": args.allow_host,
        "certfile": args.certfile,
        "keyfile": args.keyfile,
        "limits": HttpLimits(**overrides),
    }


def _tasks(values: Sequence[str]) -> dict[str, str]:
    """``--task TOOL[=required]`` values as `create_server`'s ``tasks``."""
    tasks: dict[str, str] = {}
    for value in values:
        name, _, support = value.partition("=")
        if not name or support not in ("", "optional", "required", "after-input"):
            raise ValueError(
                f"--task wants TOOL or TOOL=optional|required|after-input, got {value!r}"
            )
        tasks[name] = support or "optional"
    return tasks


class _Announce:
    """A ``task_status`` for `serve_http` that tells the operator (and tests) the URL."""

    def started(self, value: str | None = None) -> None:
        print(f"toolseam.mcp: serving {value}", file=sys.stderr, flush=True)


async def _serve_durable(
    registry: Any, http: tuple[str, int], name: str, settings: dict[str, Any], database: str
) -> None:
    """``serve --http --durable``: tasks as DBOS workflows, DBOS launched once serving."""
    import anyio
    from dbos import DBOS

    from ..durable import DurableTools
    from . import serve_http

    DBOS(config={"name": name, "system_database_url": database, "log_level": "WARNING"})
    try:
        durable = DurableTools(registry)
        host, port = http
        async with anyio.create_task_group() as tg:
            url = await tg.start(
                functools.partial(
                    serve_http,
                    registry,
                    host=host,
                    port=port,
                    name=name,
                    durable=durable,
                    **settings,
                )
            )
            # After the server is made: the tasks DBOS recovers at launch find it.
            DBOS.launch()
            _Announce().started(url)
    finally:
        DBOS.destroy()


async def _serve(
    registry: Any, http: tuple[str, int] | None, name: str, settings: dict[str, Any]
) -> None:
    from . import serve_http, serve_stdio

    if http is None:
        await serve_stdio(registry, name=name, **settings)  # at most input_deadline
        return
    host, port = http
    await serve_http(registry, host=host, port=port, name=name, task_status=_Announce(), **settings)


async def _gateway(
    upstreams: list[tuple[str, str]],
    headers: dict[str, dict[str, str]],
    oauth: dict[str, ClientCredentials],
    policy: Any,
    http: tuple[str, int] | None,
    name: str,
    settings: dict[str, Any],
) -> None:
    from .. import ToolRegistry
    from . import mount_upstreams

    registry = policy if isinstance(policy, ToolRegistry) else ToolRegistry()
    if policy is not None and not isinstance(policy, ToolRegistry):
        outcome = policy(registry)
        if isinstance(outcome, Awaitable):
            await outcome
    async with mount_upstreams(registry, dict(upstreams), headers=headers, oauth=oauth) as mounted:
        for upstream, tools in mounted.items():
            print(f"toolseam.mcp: {upstream}: {', '.join(tools)}", file=sys.stderr, flush=True)
        await _serve(registry, http, name, settings)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``toolseam.mcp`` command line and return its exit status."""
    args = _parser().parse_args(argv)
    command: str = args.command

    def fail(message: str) -> int:
        print(f"{_PROG} {command}: error: {message}", file=sys.stderr)
        return 2

    if args.http is not None and args.backend != "asyncio":
        return fail("--http serves with uvicorn, which runs on asyncio only")
    import anyio

    from ._load import TargetError, load_object, load_registry

    run: Callable[[], Awaitable[None]]
    try:
        settings = {} if args.http is None else _http_settings(args)
        if args.input_deadline is not None:
            settings["input_deadline"] = args.input_deadline
        if args.task:
            settings["tasks"] = _tasks(args.task)
    except ValueError as error:
        return fail(str(error))
    try:
        if command == "serve" and args.durable:
            database = os.environ.get("DBOS_SYSTEM_DATABASE_URL", "")
            if args.http is None or not args.task or not database:
                return fail(
                    "--durable needs --http, --task and the system database's URL in "
                    "DBOS_SYSTEM_DATABASE_URL"
                )
            registry = load_registry(args.target)
            run = functools.partial(
                _serve_durable, registry, args.http, args.name, settings, database
            )
        elif command == "serve":
            registry = load_registry(args.target)
            run = functools.partial(_serve, registry, args.http, args.name, settings)
        else:
            from ._gateway import check_name

            if len({name for name, _ in args.upstream}) != len(args.upstream):
                return fail("every --upstream needs a name of its own")
            for name, _ in args.upstream:
                check_name(name)
            from .. import ToolRegistry

            policy = None if args.policy is None else load_object(args.policy)
            if not (policy is None or callable(policy) or isinstance(policy, ToolRegistry)):
                return fail(f"--policy {args.policy!r} is neither callable nor a ToolRegistry")
            headers = _upstream_headers(args)
            oauth = _upstream_oauth(args)
            run = functools.partial(
                _gateway, args.upstream, headers, oauth, policy, args.http, args.name, settings
            )
    except (TargetError, ValueError) as error:
        return fail(str(error))
    try:
        anyio.run(run, backend=args.backend)
    except KeyboardInterrupt:
        return 130
    except BaseException as error:
        # Task groups wrap what they raise: find the OSError (a port in use, an upstream
        # that cannot be reached) wherever it is, and report it plainly.
        found = _find(error, OSError)
        if found is None:
            raise
        from ._gateway import redact_userinfo

        print(f"{_PROG} {command}: {redact_userinfo(str(found))}", file=sys.stderr)
        return 1
    return 0


def _freeze_startup() -> None:
    """Leave what start-up allocated out of every later garbage collection (`gc.freeze`).

    The modules and schemas imported by then (toolseam, the MCP SDK, pydantic, uvicorn)
    live as long as the process; without this, each full collection while serving walks
    all of them again, a pause of 30-35 ms for every call then in flight (under 1 ms). Done
    only when this module runs as the program: the library, and `main` called in a host's
    process, never change its collector.
    """
    gc.collect()
    gc.freeze()


def _find(error: BaseException, kind: type[OSError]) -> OSError | None:
    if isinstance(error, kind):
        return error
    if isinstance(error, BaseExceptionGroup):
        leaves: tuple[BaseException, ...] = cast("Any", error).exceptions
        for leaf in leaves:
            if (found := _find(leaf, kind)) is not None:
                return found
    return None


if __name__ == "__main__":
    _freeze_startup()
    sys.exit(main())
