"""`Principal`: who is calling, as the registry and every stage see it (contract §14)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import cast, final

from ._errors import safe_str, type_name
from ._json import JsonValue, MaterializationError, materialize

__all__ = ["Principal", "check_scopes", "missing_scopes"]

_EMPTY: Mapping[str, JsonValue] = materialize({})  # type: ignore[assignment]


@final
@dataclass(frozen=True, slots=True, init=False)
class Principal:
    """The authenticated caller of a call: a name, its scopes and its claims.

    Never the credential: whoever authenticated the caller (the MCP server's bearer
    middleware, an application's own login) keeps the token; a principal only says who
    it belongs to and what it may do. Immutable (``claims`` is a frozen JSON snapshot),
    hashable (by ``name`` and ``scopes``) and safe to log: its ``repr`` leaves the claims
    out.

    A call made with a principal (``ToolExecutionInput(principal=...)``) may run a tool
    only if the principal holds every scope the tool declares (``define_tool(...,
    scopes=...)``); a call without one (``None``: an in-process caller) is not checked.
    """

    name: str
    """Who is calling (an OAuth token's subject, a user id)."""
    scopes: frozenset[str]
    """What the caller may do: a tool needs all of the scopes it declares."""
    claims: Mapping[str, JsonValue] = field(repr=False, hash=False)
    """Further facts about the caller (a JWT's claims), frozen; never a token."""

    def __init__(
        self,
        name: str,
        scopes: Iterable[str] = (),
        claims: Mapping[str, JsonValue] | None = None,
    ) -> None:
        """A principal named ``name``, holding ``scopes``, with ``claims``.

        Args:
            name: A non-empty string.
            scopes: Scope names (non-empty strings without whitespace); not a single
                ``str``.
            claims: A JSON object of further facts; snapshotted, so later changes to the
                mapping do not reach the principal.

        Raises:
            TypeError: ``name`` is not a non-empty ``str``, ``scopes`` is a ``str`` or
                holds a non-string, or ``claims`` is not a JSON object.
            ValueError: A scope is empty or holds whitespace.
        """
        given: object = name
        if type(given) is not str or not given:
            raise TypeError(f"Principal: `name` must be a non-empty str, got {safe_str(given)!r}")
        held = check_scopes(scopes, "Principal")
        frozen: Mapping[str, JsonValue] = _EMPTY
        if claims is not None:
            try:
                snapshot = materialize(claims)
            except MaterializationError as error:
                raise TypeError(f"Principal: `claims` must be a JSON object ({error})") from None
            if not isinstance(snapshot, Mapping):
                raise TypeError(
                    f"Principal: `claims` must be a JSON object, got {type_name(type(claims))}"
                )
            frozen = snapshot
        object.__setattr__(self, "name", given)
        object.__setattr__(self, "scopes", held)
        object.__setattr__(self, "claims", frozen)


def check_scopes(scopes: object, where: str) -> frozenset[str]:
    """``scopes`` as a frozenset of scope names, checked; ``where`` names the caller."""
    if isinstance(scopes, str | bytes) or not isinstance(scopes, Iterable):
        raise TypeError(
            f"{where}: `scopes` must be an iterable of scope names (not a single str), "
            f"got {type_name(type(scopes))}"
        )
    held: set[str] = set()
    for scope in cast("Iterable[object]", scopes):
        if type(scope) is not str:
            raise TypeError(f"{where}: every scope must be a str, got {type_name(type(scope))}")
        if not scope or scope != "".join(scope.split()):
            raise ValueError(f"{where}: a scope must be non-empty, without whitespace: {scope!r}")
        held.add(scope)
    return frozenset(held)


def missing_scopes(needed: frozenset[str], principal: Principal) -> str | None:
    """The denial reason when ``principal`` lacks some of ``needed``, else ``None``."""
    missing = needed - principal.scopes
    if not missing:
        return None
    listed = ", ".join(sorted(missing))
    return f"the caller lacks the scope{'s' if len(missing) > 1 else ''} {listed}"
