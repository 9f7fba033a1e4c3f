"""The ``requestState`` a toolseam server hands out on MCP 2026-07-28: signed, bound, once.

A state names one suspended call (``_rounds``) and the round it answers; a client echoes it
back verbatim with its answers. The client is an attacker as far as the state goes, so it is
signed with HMAC-SHA256 under a key drawn when the server is made and held only in its
memory, and checked in constant time. Its form is four dot-separated base64url fields::

    ts1.<server instance>.<claims>.<signature>

The instance id is public: it lets a server tell a state another process issued (the server
restarted, or the retry reached another worker; it cannot check that signature) from one it
issued and that was altered (the signature does not match). The claims bind the state to the
call (a random id), the round, the tool, a digest of the arguments, and a keyed digest of the
authenticated principal (if any); nothing secret travels in them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from typing import Final, final

from mcp import MCPError
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp_types import INVALID_PARAMS

__all__ = [
    "Claims",
    "Foreign",
    "StateKey",
    "arguments_digest",
    "refused",
]

_PREFIX: Final = "ts1"

REFUSED: Final = "requestState refused"


def refused(why: str) -> MCPError:
    """The JSON-RPC error a refused state gets (``-32602``, as the SDK's own boundary)."""
    return MCPError(
        code=INVALID_PARAMS,
        message=f"{REFUSED}: {why}",
        data={"reason": "invalid_request_state"},
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(raw) != text:  # only the canonical encoding
        raise ValueError("non-canonical base64url")
    return raw


def arguments_digest(arguments: object) -> str:
    """A digest of a call's arguments, as the state binds them (canonical JSON)."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return _b64(hashlib.sha256(text.encode("ascii")).digest()[:16])


@final
@dataclass(frozen=True, slots=True)
class Claims:
    """What a verified state says: which suspended call, which round, bound to what."""

    call: str
    round: int
    tool: str
    arguments: str
    principal: str | None


@final
@dataclass(frozen=True, slots=True)
class Foreign:
    """A well-formed state another server process issued: its signature cannot be checked."""


@final
class StateKey:
    """The secret that signs one server's states, and that server's public instance id.

    Made once per server (``create_server``, ``serve_http``); never logged or sent.
    """

    __slots__ = ("_secret", "instance")

    def __init__(self) -> None:
        self._secret = os.urandom(32)
        self.instance = _b64(os.urandom(12))

    def principal(self) -> str | None:
        """A keyed digest of the authenticated caller of this request, if any."""
        token = get_access_token()
        if token is None:
            return None
        who = json.dumps(principal_components(token), separators=(",", ":"), ensure_ascii=True)
        mac = hmac.new(self._secret, b"principal:" + who.encode("ascii"), hashlib.sha256)
        return _b64(mac.digest()[:16])

    def _mac(self, signed: str) -> bytes:
        return hmac.new(self._secret, signed.encode("ascii"), hashlib.sha256).digest()

    def sign(self, claims: Claims) -> str:
        """The state for ``claims``."""
        body = {
            "c": claims.call,
            "r": claims.round,
            "t": claims.tool,
            "a": claims.arguments,
            "p": claims.principal,
        }
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=True)
        signed = f"{_PREFIX}.{self.instance}.{_b64(text.encode('ascii'))}"
        return f"{signed}.{_b64(self._mac(signed))}"

    def verify(self, state: str) -> Claims | Foreign:
        """The claims of a state this server issued, or `Foreign`.

        Raises:
            MCPError: ``-32602``: the state is malformed, or its signature does not match.
        """
        parts = state.split(".") if state.isascii() else []
        if len(parts) != 4 or parts[0] != _PREFIX or not all(parts):
            raise refused("it is not a request state a toolseam server issued")
        _, instance, body, signature = parts
        if not hmac.compare_digest(instance.encode("ascii"), self.instance.encode("ascii")):
            return Foreign()
        try:
            mac = _unb64(signature)
        except ValueError:
            mac = b""
        if not hmac.compare_digest(mac, self._mac(f"{_PREFIX}.{instance}.{body}")):
            raise refused("its signature does not match: it was altered")
        try:
            fields = json.loads(_unb64(body))
            claims = Claims(
                call=str(fields["c"]),
                round=int(fields["r"]),
                tool=str(fields["t"]),
                arguments=str(fields["a"]),
                principal=None if fields["p"] is None else str(fields["p"]),
            )
        except (ValueError, KeyError, TypeError):  # signed by us, so never in practice
            raise refused("it is not a request state a toolseam server issued") from None
        return claims
