"""The scripted tools and stages: bodies and listeners whose every step the probe sees (§11).

Each body takes ``{"key": ...}`` and reports under that key; a scripted stage (approver,
wrapper, listener) reports under ``<call id>@<stage>``. What a body does once it is told to
stop is its *behaviour*; how it is told is the registry's business (`Listen`). Every async
body or stage that is torn down by task cancellation does what a careful one does: it
records that, finishes its cleanup inside a shielded scope (at the ``cleanup`` gate) and
re-raises.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, Literal, TypeAlias, final

import anyio

from ._driver import Call, Listen, WrapperScript
from ._probe import Probe

if TYPE_CHECKING:
    from ._body_reach import Reach, Reaching

__all__ = [
    "PARAMETERS",
    "Behaviour",
    "ScriptedTool",
    "StageBehaviour",
    "done",
    "listener",
    "scripted",
    "wait_told",
    "wrapper",
]

StageBehaviour: TypeAlias = Literal["pass", "hold", "ignore"]
"""A scripted listener: ``pass`` goes on at once; ``hold`` waits until told, cleans up (at
its ``cleanup`` gate) and goes on; ``ignore`` waits until told and works on regardless (at
its ``work`` gate)."""

Behaviour: TypeAlias = Literal[
    "ok",
    "fail",
    "hold",
    "ignore",
    "fail_when_told",
    "slow",
    "nest_hold",
    "nest_ok",
    # What a body reaches (`_reaching_bodies`): progress, an elicitation, a process.
    "progress",
    "progress_late",
    "elicit",
    "process",
]

PARAMETERS: Final[Mapping[str, object]] = {
    "type": "object",
    "properties": {"key": {"type": "string"}},
    "required": ["key"],
    "additionalProperties": False,
}
"""The JSON schema of every scripted tool's arguments."""

_REACHES: Final[Mapping[Behaviour, frozenset[Reaching]]] = {
    "progress": frozenset({"progress"}),
    "progress_late": frozenset({"progress"}),
    "elicit": frozenset({"elicit"}),
    "process": frozenset({"process"}),
}

_POLL = 0.001  # a thread body's wait between looks at `Listen.is_told` (no ordering rides on it)


def done(key: str) -> str:
    """The value a scripted body returns: ``"done:<key>"``."""
    return f"done:{key}"


@final
class ScriptedTool:
    """A tool whose body follows a script and reports to the kit's probe.

    Register it under `name`, with `description`, `parameters` and, where the registry has
    one, its `timeout`; call `run` from an async body, or `run_sync` from a synchronous one
    when `sync` is set (the registry should run it on a worker thread). `parallel` says the
    tool is safe to run concurrently with others (the registry's parallel mode), and
    `idempotent` that it may run twice (a durable registry's recovery). A body whose
    `reaches` is not empty also needs the `Reach` the driver builds for it.
    """

    __slots__ = (
        "_behaviour",
        "_probe",
        "description",
        "idempotent",
        "kept",
        "name",
        "parallel",
        "program",
        "sync",
        "timeout",
    )

    def __init__(
        self,
        probe: Probe,
        name: str,
        behaviour: Behaviour,
        *,
        sync: bool = False,
        timeout: float | None = None,
        parallel: bool = False,
        program: Sequence[str] = (),
        idempotent: bool = False,
    ) -> None:
        self._probe = probe
        self._behaviour: Behaviour = behaviour
        self.name: str = name
        """The tool's name."""
        self.description: str = f"A scripted conformance tool ({behaviour})."
        """A description for the registry (and a model)."""
        self.sync: bool = sync
        """Run this tool's body with `run_sync`, on a worker thread."""
        self.timeout: float | None = timeout
        """The tool's own deadline in seconds, for registries that enforce one."""
        self.parallel: bool = parallel
        """Whether calls of this tool may run concurrently with others."""
        self.program: Sequence[str] = program
        """The argv a ``process`` body runs through its registry's helper."""
        self.idempotent: bool = idempotent
        """Whether running the body twice is harmless, for registries that record it (a
        durable engine may run such a call again after a crash; capability ``durable``)."""
        self.kept: dict[str, Reach] = {}
        """The `Reach` of each body that keeps it past its return, by key."""

    @property
    def reaches(self) -> frozenset[Reaching]:
        """What the body reaches through the `Reach` it must be given (empty: none)."""
        return _REACHES.get(self._behaviour, frozenset())

    @property
    def parameters(self) -> Mapping[str, object]:
        """The JSON schema of the arguments: ``{"key": str}``."""
        return PARAMETERS

    def __repr__(self) -> str:
        return f"<ScriptedTool {self.name!r} {self._behaviour}{' sync' if self.sync else ''}>"

    # -- async bodies --------------------------------------------------------------------

    async def run(
        self, arguments: Mapping[str, object], listen: Listen, reach: Reach | None = None
    ) -> str:
        """The body, for an async tool.

        Args:
            arguments: The call's arguments as the registry passes them (``{"key": ...}``).
            listen: How this body hears of cancellation, from the driver.
            reach: What the body reaches in this registry, from the driver (needed when
                `reaches` is not empty).

        Returns:
            ``"done:<key>"`` (or a nested tool's report); raises through
            ``listen.stop()`` or ``listen.fail()`` where the script says so.
        """
        if self.sync:
            raise TypeError(f"{self.name} is a synchronous tool: call run_sync in a thread")
        key = str(arguments["key"])
        async with scripted(self._probe, key, "body", listen):
            if self.reaches:
                from ._reaching_bodies import script  # it builds on this module

                return await script(self, self._probe, self._behaviour, key, listen, reach)
            return await self._script(key, listen)

    async def _script(self, key: str, listen: Listen) -> str:
        probe = self._probe
        behaviour = self._behaviour
        if behaviour == "ok":
            probe.effect(key, "work")
            return done(key)
        if behaviour == "fail":
            probe.effect(key, "work")
            listen.fail(f"scripted failure of {key}")
        if behaviour == "slow":
            await probe.gate(key, "work")
            probe.effect(key, "work")
            return done(key)
        if behaviour in ("nest_hold", "nest_ok"):
            child = "hold" if behaviour == "nest_hold" else "ok"
            outcome = await listen.call(Call(f"{key}/child", child, {"key": f"{key}/child"}))
            probe.effect(key, f"child:{outcome.status}")
            if listen.is_told():
                listen.stop()
            return f"{done(key)}|{outcome.status}:{outcome.value}"
        told = await wait_told(probe, key, listen)
        if behaviour == "ignore":
            await probe.gate(key, "work")  # told, and carrying on regardless
            probe.effect(key, "work")
            return done(key)
        await probe.gate(key, "cleanup")
        probe.effect(key, "cleanup")
        if behaviour == "fail_when_told":
            listen.fail(f"scripted failure of {key} after it was told to stop")
        if told:
            listen.stop()
        return done(key)

    # -- thread bodies -------------------------------------------------------------------

    def run_sync(
        self, arguments: Mapping[str, object], listen: Listen, reach: Reach | None = None
    ) -> str:
        """The body, for a synchronous tool (the registry runs it on a worker thread).

        Args:
            arguments: The call's arguments (``{"key": ...}``).
            listen: How this body hears of cancellation (``is_told``, polled).
            reach: What the body reaches in this registry (needed when `reaches` is not
                empty).

        Returns:
            ``"done:<key>"``; raises through ``listen.stop()`` where the script says so.
        """
        if not self.sync:
            raise TypeError(f"{self.name} is an async tool: await run")
        key = str(arguments["key"])
        probe = self._probe
        probe.entered(key, listen.is_told)
        try:
            if self.reaches:
                from ._reaching_bodies import script_sync  # it builds on this module

                return script_sync(probe, self._behaviour, key, reach)
            if probe.body(key).on_loop_thread:
                # Blocking here would block the loop the kit runs on: record and return.
                probe.effect(key, "work")
                return done(key)
            if self._behaviour == "ok":
                probe.effect(key, "work")
                return done(key)
            told = self._wait_told_sync(key, listen)
            if self._behaviour == "ignore":
                probe.gate_sync(key, "work")
                probe.effect(key, "work")
                return done(key)
            probe.gate_sync(key, "cleanup")
            probe.effect(key, "cleanup")
            if told:
                listen.stop()
            return done(key)
        finally:
            probe.finished(key)

    def _wait_told_sync(self, key: str, listen: Listen) -> bool:
        probe = self._probe
        idle = threading.Event()
        while not probe.released:
            if listen.is_told():
                probe.told(key, "signal")
                return True
            idle.wait(_POLL)
        return False


# -- shared by bodies and stages -----------------------------------------------------------


@asynccontextmanager
async def scripted(
    probe: Probe, key: str, stage: str, listen: Listen | None = None
) -> AsyncGenerator[None]:
    """Report ``key`` entered, then finished (its ``finished_at``) however it ends.

    Torn down by task cancellation, it records that, finishes its cleanup shielded (at the
    ``cleanup`` gate) and lets the cancellation go on.
    """
    probe.entered(key, None if listen is None else listen.is_told, stage=stage)
    try:
        yield
    except anyio.get_cancelled_exc_class():
        probe.told(key, "task cancellation")
        with anyio.CancelScope(shield=True):
            await probe.gate(key, "cleanup")
        probe.effect(key, "cleanup")
        raise
    finally:
        probe.finished(key)


async def wait_told(probe: Probe, key: str, listen: Listen) -> bool:
    """Wait until the registry tells ``key`` to stop (or the kit gives up): whether it did."""
    told = False
    async with anyio.create_task_group() as group:

        async def on_told() -> None:
            nonlocal told
            await listen.wait()
            told = True
            group.cancel_scope.cancel()

        async def on_release() -> None:
            await probe.until(lambda: probe.released)
            group.cancel_scope.cancel()

        group.start_soon(on_told)
        group.start_soon(on_release)
    if told:
        probe.told(key, "signal")
    return told


async def listener(
    probe: Probe, key: str, stage: str, behaviour: StageBehaviour, listen: Listen
) -> None:
    """A scripted pre- or post-execute listener reporting under ``key`` (see `StageBehaviour`)."""
    async with scripted(probe, key, stage, listen):
        if behaviour == "pass":
            probe.effect(key, "work")
            return
        await wait_told(probe, key, listen)
        if behaviour == "ignore":
            await probe.gate(key, "work")  # told, and carrying on regardless
            probe.effect(key, "work")
            return
        await probe.gate(key, "cleanup")
        probe.effect(key, "cleanup")


def wrapper(probe: Probe, hold: Literal["before", "after"]) -> WrapperScript:
    """A scripted around-dispatch wrapper, reporting under ``<call id>@wrapper``.

    It holds the call at its ``hold`` gate: ``before`` delegating (``next``), or ``after``
    the body returned.
    """

    async def wrap(call: Call, next: Callable[[], Awaitable[object]]) -> object:
        key = f"{call.call_id}@wrapper"
        async with scripted(probe, key, "wrapper"):
            if hold == "before":
                await probe.gate(key, "before")
            result = await next()
            if hold == "after":
                await probe.gate(key, "after")
            return result

    return wrap
