"""Who may call `serve_http`: bearer-token verifiers, and the settings of an HTTP server.

The server is an OAuth 2.1 *resource server* (MCP's authorization spec), built on the SDK's
own pieces: a `TokenVerifier` turns the ``Authorization: Bearer`` header into an
``AccessToken`` (the SDK's ``BearerAuthBackend``), its ``RequireAuthMiddleware`` answers 401
(with ``WWW-Authenticate: Bearer ... resource_metadata=...``) or 403 ``insufficient_scope``,
and its protected-resource metadata routes serve RFC 9728 metadata. Two verifiers ship:

- `StaticTokens`: a fixed set of tokens (or their SHA-256 digests), each naming a principal
  and its scopes; compared in constant time (``hmac.compare_digest`` over digests).
- `JwtTokens`: JWT access tokens signed by a key of a JWKS (a file, or an ``https`` URL
  fetched and cached), with ``iss``, ``aud``, ``exp`` and ``nbf`` checked, verified with PyJWT
  (which the MCP SDK itself depends on, so no second JOSE stack is installed; it is widely
  used and maintained, refuses ``alg: none`` unless asked, and its ``cryptography`` backend
  does the signature maths). Only asymmetric algorithms are accepted.

A verified token never leaves the verifier: the ``AccessToken`` it returns carries a
redacted ``token``, so the raw token reaches no handler, log, error or span.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import itertools
import json
import logging
import math
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, cast, final

import anyio
import anyio.to_thread
import httpx2
import jwt
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.streamable_http_manager import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from .._principal import Principal

__all__ = [
    "REDACTED_TOKEN",
    "ClientCredentials",
    "HttpAuth",
    "HttpLimits",
    "JwtTokens",
    "StaticTokens",
    "principal_of",
]

REDACTED_TOKEN: Final = "[redacted]"
"""The ``token`` of every ``AccessToken`` toolseam's verifiers return (never the token)."""

_ASYMMETRIC: Final = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
_CACHE_SIZE: Final = 4096
# After a failed JWKS fetch the next try waits 1 s, then 2, 4, ... up to `refresh_seconds`:
# an identity provider that was down at startup is not locked out for a whole refresh
# period, and made-up key ids still cannot make it fetch more than once per delay.
_RETRY_FIRST: Final = 1.0

logger = logging.getLogger("toolseam.mcp")

# The clock of the JWKS refresh (a name of its own, so a test can move it).
_monotonic = time.monotonic


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@final
@dataclass(frozen=True, slots=True)
class _Static:
    digest: bytes
    principal: str
    scopes: tuple[str, ...]
    access: AccessToken


@final
class StaticTokens:
    """A `TokenVerifier` of fixed bearer tokens, each naming a principal and its scopes.

    Every token is kept as its SHA-256 digest, and a presented token's digest is compared
    with each of them by ``hmac.compare_digest`` (all of them, every time), so neither
    the comparison nor the table reveals a token.

    Build it from ``(token, principal, scopes)`` entries, or with `from_file`.
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[tuple[str, str, Iterable[str]]]) -> None:
        """Verify these ``(token, principal, scopes)`` entries.

        A token written ``sha256:HEX`` (the prefix in any case) is the SHA-256 digest of
        the token (64 hex digits). A token may appear once (as itself or as its digest).

        Raises:
            ValueError: An entry is malformed, or repeats a token (the message never
                shows the token).
        """
        checked: list[_Static] = []
        seen: dict[bytes, int] = {}
        for number, (token, principal, scopes) in enumerate(entries, start=1):
            if not principal:
                raise ValueError("every static token needs a principal")
            held = tuple(scopes)
            access = AccessToken(
                token=REDACTED_TOKEN, client_id=principal, subject=principal, scopes=list(held)
            )
            digest = _entry_digest(token)
            # One token, two principals: which one it names must not be left to order.
            if digest in seen:
                raise ValueError(f"entries {seen[digest]} and {number} have the same token")
            seen[digest] = number
            checked.append(_Static(digest, principal, held, access))
        self._entries: tuple[_Static, ...] = tuple(checked)

    @classmethod
    def from_file(cls, path: str | Path) -> StaticTokens:
        """Read a token file: one ``TOKEN_OR_sha256:HEX PRINCIPAL [SCOPE ...]`` a line.

        A word starting with ``#`` begins a comment, to the end of its line; blank lines
        are skipped. A token may appear once (as itself or as its digest).

        Raises:
            ValueError: A line is malformed, or repeats a token (named by its number,
                never by its token).
            OSError: The file cannot be read.
        """
        entries: list[tuple[str, str, Iterable[str]]] = []
        lines: dict[bytes, int] = {}
        for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
            words = line.split()
            words = list(itertools.takewhile(lambda word: not word.startswith("#"), words))
            if not words:
                continue
            if len(words) < 2:
                raise ValueError(f"{path}, line {number}: expected TOKEN PRINCIPAL [SCOPE ...]")
            try:
                digest = _entry_digest(words[0])
            except ValueError as error:
                raise ValueError(f"{path}, line {number}: {error}") from None
            if digest in lines:
                raise ValueError(f"{path}, line {number}: the same token as line {lines[digest]}")
            lines[digest] = number
            entries.append((words[0], words[1], words[2:]))
        return cls(entries)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The principal of ``token``, or None (constant time over the table)."""
        digest = _digest(token)
        found: _Static | None = None
        for entry in self._entries:
            if hmac.compare_digest(digest, entry.digest):
                found = entry
        # The same AccessToken for the same entry, as JwtTokens' cache does for a token.
        return None if found is None else found.access


def _entry_digest(token: str) -> bytes:
    if token[:7].lower() == "sha256:":  # any case: the digest itself is never a token
        hexed = token[7:]
        try:
            digest = bytes.fromhex(hexed)
        except ValueError:
            digest = b""
        if len(digest) != 32:
            raise ValueError("a sha256: token needs 64 hex digits")
        return digest
    if not token:
        raise ValueError("empty token")
    return _digest(token)


@final
class JwtTokens:
    """A `TokenVerifier` of JWT access tokens signed by a key of a JWKS.

    Checks the signature (asymmetric algorithms only: ``alg: none`` and HMAC are refused,
    a JWKS's symmetric keys are ignored, a key verifies only with its own algorithm, and a
    ``crit`` header refuses the token, whatever the installed PyJWT does),
    ``iss`` (exactly ``issuer``), ``aud`` (contains ``audience``), ``exp`` (required) and
    ``nbf``. The principal is ``sub``, the scopes the space-separated ``scope`` claim (or a
    ``scp`` list). Keys are cached: a JWKS file is read once, a JWKS URL is fetched on
    first use and again (at most every ``refresh_seconds``) for a key id it does not
    know or once its copy is older than that; after a failed fetch it tries again after
    1 s, then 2, 4, ... up to ``refresh_seconds``, verifying meanwhile with the keys it
    holds. Verified tokens are cached (by digest) until they expire.
    """

    __slots__ = (
        "_algorithms",
        "_audience",
        "_failures",
        "_issuer",
        "_jwks",
        "_keys",
        "_leeway",
        "_lock",
        "_next_fetch",
        "_refresh",
        "_verified",
    )

    def __init__(
        self,
        jwks: str | Path | Mapping[str, Any],
        *,
        issuer: str,
        audience: str,
        algorithms: Sequence[str] = _ASYMMETRIC,
        leeway: float = 0.0,
        refresh_seconds: float = 300.0,
    ) -> None:
        """Verify tokens signed by ``jwks``, issued by ``issuer`` for ``audience``.

        Args:
            jwks: The key set: a JWKS document, a path to one, or an ``https://`` URL
                (``http://`` only on loopback).
            issuer: The ``iss`` a token must carry.
            audience: The value ``aud`` must hold (the resource's identifier).
            algorithms: The signature algorithms accepted (asymmetric ones only).
            leeway: Seconds of clock skew allowed for ``exp`` and ``nbf``.
            refresh_seconds: How old a fetched JWKS may get before it is fetched again
                (and the longest wait before a failed fetch is tried again).

        Raises:
            ValueError: An algorithm is not asymmetric, a JWKS document is malformed, or a
                JWKS URL is plain ``http`` off loopback.
        """
        bad = [name for name in algorithms if name not in _ASYMMETRIC]
        if bad or not algorithms:
            raise ValueError(f"only asymmetric JWT algorithms are accepted, not {bad}")
        self._algorithms = tuple(algorithms)
        self._issuer = issuer
        self._audience = audience
        self._leeway = leeway
        self._refresh = refresh_seconds
        self._jwks: str | None = None
        self._keys: dict[str, jwt.PyJWK] = {}
        self._next_fetch = 0.0
        self._failures = 0
        self._lock = anyio.Lock()
        self._verified: dict[bytes, AccessToken] = {}
        if isinstance(jwks, Mapping):
            self._keys = _key_set(jwks)
        elif str(jwks).lower().startswith(("http://", "https://")):
            self._jwks = _jwks_url(str(jwks))
        else:
            self._keys = _key_set(json.loads(Path(jwks).read_text()))

    async def verify_token(self, token: str) -> AccessToken | None:
        """The principal of a valid token, or None (any fault: signature, claim, time)."""
        digest = _digest(token)
        now = time.time()
        cached = self._verified.get(digest)
        if cached is not None:
            if cached.expires_at is not None and cached.expires_at + self._leeway > now:
                return cached
            del self._verified[digest]
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        alg: object = header.get("alg")
        kid: object = header.get("kid")
        if not isinstance(alg, str) or alg not in self._algorithms or "crit" in header:
            return None  # `crit`: an extension this verifier does not understand (RFC 7515)
        key = await self._key(kid if isinstance(kid, str) else None)
        if key is None or key.algorithm_name != alg:
            return None  # a key verifies only with its own algorithm, whatever PyJWT does
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError:
            return None
        access = _access(claims, self._audience)
        if access is None:
            return None
        if len(self._verified) >= _CACHE_SIZE:
            self._verified.pop(next(iter(self._verified)))
        self._verified[digest] = access
        return access

    async def _key(self, kid: str | None) -> jwt.PyJWK | None:
        key = self._lookup(kid)
        if self._jwks is None or (key is not None and not self._stale()):
            return key
        # One fetch at a time; the requests that wait for it then find its keys. A key id
        # not seen yet may be a rotated key, but fetching again waits `refresh_seconds`
        # (an attacker's made-up key ids cannot make it fetch more).
        async with self._lock:
            if self._stale():
                url = self._jwks
                try:
                    document = await anyio.to_thread.run_sync(_fetch, url)
                    keys = _key_set(document)
                except (OSError, ValueError, jwt.PyJWTError) as error:
                    # Keep the keys we have; a token they cannot verify is refused.
                    self._failures += 1
                    delay = min(self._refresh, _RETRY_FIRST * 2 ** min(self._failures - 1, 16))
                    self._next_fetch = _monotonic() + delay
                    logger.warning(
                        "JwtTokens: fetching the JWKS failed (%s); next try in %.0f s",
                        type(error).__name__,
                        delay,
                    )
                else:
                    self._keys = keys
                    self._failures = 0
                    self._next_fetch = _monotonic() + self._refresh
            return self._lookup(kid)

    def _stale(self) -> bool:
        return _monotonic() >= self._next_fetch

    def _lookup(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is not None:
            return self._keys.get(kid)
        if len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return None


def _jwks_url(url: str) -> str:
    """``url``, if it is fit to fetch a JWKS from: https, or plain http on loopback."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and _loopback(parts.hostname)):
        return url
    # The keys decide who gets in: anyone on a plain-http path could hand in their own.
    raise ValueError("a JWKS URL must be https (plain http only on loopback)")


def _loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def _fetch(url: str) -> Mapping[str, Any]:
    from urllib.request import HTTPRedirectHandler, build_opener

    class Redirects(HTTPRedirectHandler):
        # A redirect's target must be fit for keys too (urllib would follow https to http).
        def redirect_request(
            self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
        ) -> Any:
            try:
                _jwks_url(urllib.parse.urljoin(req.full_url, newurl))
            except ValueError:
                fp.close()
                raise
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    from urllib.error import HTTPError

    try:
        response = build_opener(Redirects).open(url, timeout=10)
    except HTTPError as error:
        error.close()  # its response holds the connection open
        raise
    with response:
        body: bytes = response.read(1 << 20)
    return cast("Mapping[str, Any]", json.loads(body))


def _key_set(document: Mapping[str, Any]) -> dict[str, jwt.PyJWK]:
    try:
        key_set = jwt.PyJWKSet.from_dict(dict(document))
    except jwt.PyJWTError as error:
        raise ValueError(f"not a usable JWKS: {error}") from None
    keys: dict[str, jwt.PyJWK] = {}
    for index, key in enumerate(key_set.keys):
        if key.algorithm_name not in _ASYMMETRIC:
            continue  # a symmetric (`oct`) key: its secret is as public as the JWKS
        keys[key.key_id if key.key_id is not None else f"#{index}"] = key
    return keys


def _access(claims: Mapping[str, Any], audience: str) -> AccessToken | None:
    subject: object = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        return None
    scope: object = claims.get("scope")
    scp: object = claims.get("scp")
    scopes: list[str]
    if isinstance(scope, str):
        scopes = scope.split()
    elif isinstance(scp, list):
        scopes = [str(item) for item in cast("list[object]", scp)]
    else:
        scopes = []
    client: object = claims.get("client_id", claims.get("azp"))
    expires: object = claims.get("exp")
    return AccessToken(
        token=REDACTED_TOKEN,
        client_id=client if isinstance(client, str) and client else subject,
        subject=subject,
        scopes=scopes,
        expires_at=int(expires) if isinstance(expires, int | float) else None,
        resource=audience,
        claims={key: value for key, value in claims.items() if key != "jti"},
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpAuth:
    """How `serve_http` authenticates its clients (an OAuth 2.1 resource server).

    Attributes:
        verifier: Turns a bearer token into the SDK's ``AccessToken`` (or None): a
            `StaticTokens`, a `JwtTokens`, or any ``mcp`` ``TokenVerifier``.
        authorization_servers: The authorization servers named in the RFC 9728
            metadata. Without any, no metadata is served (and the 401's
            ``WWW-Authenticate`` names none).
        resource_url: This server's public URL (its resource identifier, e.g. behind a
            reverse proxy); by default the URL it is served at.
        required_scopes: Scopes every request needs; a token without them gets 403
            ``insufficient_scope``.
        resource_name: A human-readable name in the metadata.
    """

    verifier: TokenVerifier
    authorization_servers: Sequence[str] = ()
    resource_url: str | None = None
    required_scopes: Sequence[str] = ()
    resource_name: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpLimits:
    """Fair limits for `serve_http`; every refusal is an HTTP or JSON-RPC error.

    Attributes:
        max_body_bytes: A larger request body is refused (413) before it is parsed.
        max_sessions: Open sessions (2025-11-25 clients) at most; another is refused (503).
        max_sessions_per_principal: Open sessions one authenticated principal may hold;
            another is refused (429).
        session_idle_timeout: Seconds after which an idle session is closed.
        max_calls_per_principal: ``tools/call`` requests one authenticated principal may
            have running at once; another is refused with a JSON-RPC error before it
            reaches the registry (its body never runs).
    """

    max_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_SIZE
    max_sessions: int = 1000
    max_sessions_per_principal: int = 32
    session_idle_timeout: float = 600.0
    max_calls_per_principal: int = 64

    def __post_init__(self) -> None:
        """Refuse a limit that is not positive."""
        values: dict[str, float] = {
            "max_body_bytes": self.max_body_bytes,
            "max_sessions": self.max_sessions,
            "max_sessions_per_principal": self.max_sessions_per_principal,
            "session_idle_timeout": self.session_idle_timeout,
            "max_calls_per_principal": self.max_calls_per_principal,
        }
        for name, value in values.items():
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number, got {value!r}")


_PRINCIPALS: dict[int, tuple[AccessToken, Principal]] = {}


def principal_of(access: AccessToken) -> Principal:
    """The `Principal` of a verified token: its subject (or client), scopes and claims.

    Never its ``token``: toolseam's verifiers redact it already, and any other verifier's
    is left behind here. Claims that are not JSON are left out. Kept per ``AccessToken``
    object (toolseam's verifiers hand out the same one for the same token), so a call
    pays for building its principal once per verified token, not once per request.
    """
    known = _PRINCIPALS.get(id(access))
    if known is not None and known[0] is access:
        return known[1]
    principal = _principal_of(access)
    if len(_PRINCIPALS) >= _CACHE_SIZE:
        _PRINCIPALS.pop(next(iter(_PRINCIPALS)))
    _PRINCIPALS[id(access)] = (access, principal)
    return principal


def _principal_of(access: AccessToken) -> Principal:
    name = access.subject or access.client_id or "unknown"
    claims: Mapping[str, Any] = access.claims or {}
    try:
        return Principal(name, access.scopes, claims)
    except (TypeError, ValueError):
        # A verifier's odd claims or scope names cost the caller its claims, or its
        # scopes, never the call's principal.
        scopes = [scope for scope in access.scopes if scope and scope.split() == [scope]]
        try:
            return Principal(name, scopes, claims)
        except TypeError:
            return Principal(name, scopes)


@final
@dataclass(frozen=True, kw_only=True, slots=True)
class ClientCredentials:
    """The gateway's own OAuth client credentials for one upstream (the client side).

    With these, the gateway gets its access token from the upstream's authorization server
    by the ``client_credentials`` grant, through the MCP SDK's
    ``ClientCredentialsOAuthProvider``: on the upstream's 401 it reads the upstream's RFC
    9728 metadata, then the authorization server's, asks its token endpoint (with the RFC
    8707 ``resource`` of the upstream, and the scopes MCP's scope selection picks: the
    upstream's ``WWW-Authenticate`` challenge, else its metadata's ``scopes_supported``,
    else the authorization server's) and presents the token; a new one is fetched when the
    upstream refuses it. Tokens are kept in memory only. The secret never appears in a
    ``repr``, a log or an error message.

    Attributes:
        issuer: The authorization server these credentials belong to (its issuer URL,
            ``https``; plain ``http`` only on loopback): they are sent to no other,
            whatever the upstream's metadata names.
        client_id: The gateway's client id at that authorization server.
        client_secret: Its secret.
        auth_method: How the secret is presented at the token endpoint.
    """

    issuer: str
    client_id: str
    client_secret: str = field(repr=False)
    auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"

    def __post_init__(self) -> None:
        """Refuse an issuer but https (http on loopback), or an empty id or secret."""
        if not self.issuer.lower().startswith(("https://", "http://")):
            raise ValueError(f"the issuer must be an http(s) URL, got {self.issuer!r}")
        parts = urllib.parse.urlsplit(self.issuer)
        if parts.scheme != "https" and not _loopback(parts.hostname):
            # OAuth 2.1: TLS but on loopback; the secret goes where the metadata says.
            raise ValueError("the issuer must be https (plain http only on loopback)")
        if not self.client_id or not self.client_secret:
            raise ValueError("client credentials need a client id and a secret")

    def provider(self, server_url: str) -> httpx2.Auth:
        """The SDK's ``ClientCredentialsOAuthProvider`` for the upstream at ``server_url``."""
        from mcp.client.auth.extensions.client_credentials import (
            ClientCredentialsOAuthProvider,
        )

        return ClientCredentialsOAuthProvider(
            server_url=server_url,
            storage=_MemoryTokens(),
            client_id=self.client_id,
            client_secret=self.client_secret,
            token_endpoint_auth_method=self.auth_method,
            issuer=self.issuer,
        )


@final
class _MemoryTokens:
    """The SDK's ``TokenStorage``, in this process's memory only."""

    __slots__ = ("_client", "_tokens")

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info
