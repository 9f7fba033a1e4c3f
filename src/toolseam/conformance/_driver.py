"""The driver protocol: what a registry implements to be measured by the kit (contract §11).

A driver adapts one registry. For each clause the kit hands it a `Scenario`: scripted tools
to register, the calls to make, a `Stop` to wire to the registry's own way of cancelling,
and optionally scripted stages (approval, an around-dispatch wrapper, pre- and post-execute
listeners, a result observer). The driver runs the
calls through the registry's real tool-execution path and returns one `Outcome` per call,
classified from what the registry produced. Each scripted body is given a `Listen`, built by
the driver from whatever the registry offers the body to hear of cancellation (a signal, a
token, task cancellation).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NoReturn, Protocol, TypeAlias, final

if TYPE_CHECKING:
    from ._body_reach import ElicitationScript, ProgressSink
    from ._scripts import ScriptedTool

__all__ = [
    "CAPABILITIES",
    "ApprovalScript",
    "Call",
    "Capability",
    "CodeReturnScript",
    "Driver",
    "Durable",
    "Listen",
    "ListenerScript",
    "McpStop",
    "ObserverScript",
    "Outcome",
    "Program",
    "Scenario",
    "Status",
    "Stop",
    "WrapperScript",
]

Capability: TypeAlias = Literal[
    "host_cancel",
    "sync_bodies",
    "batch",
    "timeouts",
    "nested",
    "approval",
    "around_dispatch",
    "pre_execute",
    "post_execute",
    "result_observer",
    "progress",
    "elicitation",
    "process",
    "ptc",
    "durable",
    "mcp",
    "mcp_input_required",
]
"""What a driver can do beyond single async calls; a clause needing a missing one is skipped."""

CAPABILITIES: tuple[Capability, ...] = (
    "host_cancel",
    "sync_bodies",
    "batch",
    "timeouts",
    "nested",
    "approval",
    "around_dispatch",
    "pre_execute",
    "post_execute",
    "result_observer",
    "progress",
    "elicitation",
    "process",
    "ptc",
    "durable",
    "mcp",
    "mcp_input_required",
)
"""Every capability, in the order reports list them."""

Status: TypeAlias = Literal[
    "ok", "error", "aborted", "aborted_before_dispatch", "cancelled", "timeout", "unknown", "none"
]
"""How a call ended, in the kit's words.

``ok``: a success; ``error``: a failure that is not a cancellation; ``aborted``: cancelled
after the body was invoked; ``aborted_before_dispatch``: cancelled, the body never ran;
``cancelled``: cancelled, and the registry does not say whether the body ran;
``timeout``: the tool's own deadline ended it; ``unknown``: the registry says the body may
or may not have run, because a crash lost its outcome (durable execution); ``none``: the
registry gave no result (it raised, or the call vanished). A driver maps the registry's own
outcome onto these and must not invent a distinction the registry does not make: when its
cancellation outcome cannot tell "ran" from "never ran", report ``cancelled`` (or ``none``)
for both.
"""


@final
@dataclass(frozen=True, slots=True)
class Call:
    """One call the kit asks for."""

    call_id: str
    """The call's id (unique within a scenario)."""
    tool: str
    """The name of the scripted tool to call."""
    arguments: Mapping[str, str]
    """The arguments: ``{"key": ...}``, the key the scripted body reports under."""


@final
@dataclass(frozen=True, slots=True)
class Outcome:
    """How one call ended, classified by the driver from the registry's own result."""

    call_id: str
    """The call this outcome belongs to."""
    status: Status
    """The kit's classification."""
    detail: str = ""
    """The registry's own words: a message, a code, the exception it raised."""
    value: object = None
    """The value of a success (the scripted bodies return ``"done:<key>"``)."""


class Listen(Protocol):
    """A scripted body's view of the registry's cancellation, built by the driver per call.

    Which members work depends on the registry: one that cancels only by tearing tasks down
    has nothing to tell a thread, so ``is_told`` stays ``False`` and ``wait`` never returns
    (task cancellation interrupts it instead).
    """

    def is_told(self) -> bool:
        """Whether the registry has asked this body to stop (thread-safe)."""
        ...

    async def wait(self) -> None:
        """Return once the registry asks this body to stop."""
        ...

    def stop(self) -> NoReturn:
        """Raise what this registry's bodies raise when they stop because they were told."""
        ...

    def fail(self, message: str) -> NoReturn:
        """Raise this registry's tool error, with ``message``."""
        ...

    async def call(self, call: Call) -> Outcome:
        """Make a nested call from inside the body, passing on its cancellation (``nested``)."""
        ...


@final
class Stop:
    """The kit's abort button for one scenario; the driver wires it to the registry.

    `connect` registers the registry's own abort (``controller.abort``, ``token.cancel``, a
    cancel scope's ``cancel``); the kit presses the button at the moment a clause needs.
    Callbacks run in the kit's task, synchronously, once.
    """

    __slots__ = ("_aborted", "_callbacks")

    def __init__(self) -> None:
        self._aborted = False
        self._callbacks: list[Callable[[], object]] = []

    @property
    def aborted(self) -> bool:
        """Whether the kit has pressed the button."""
        return self._aborted

    def connect(self, abort: Callable[[], object]) -> None:
        """Call ``abort`` when the kit aborts (at once, if it already has)."""
        if self._aborted:
            abort()
        else:
            self._callbacks.append(abort)

    def _press(self) -> None:
        if self._aborted:
            return
        self._aborted = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


ApprovalScript: TypeAlias = Callable[
    [Call, Listen], Awaitable[Literal["approve", "reject", "cancel"]]
]
"""The kit's scripted approver: the driver calls it where its registry asks for approval,
with a `Listen` on the approval's own cancellation, and maps the answer onto the registry's:
``"approve"`` lets the call go on, ``"reject"`` refuses it, ``"cancel"`` says the request was
withdrawn (toolseam's ``"cancelled"``)."""

WrapperScript: TypeAlias = Callable[[Call, Callable[[], Awaitable[object]]], Awaitable[object]]
"""The kit's scripted around-dispatch wrapper: the driver calls it around the body's dispatch
with the registry's ``next``, and hands back to the registry whatever it returns."""

ListenerScript: TypeAlias = Callable[[Call, Listen], Awaitable[None]]
"""The kit's scripted pre- or post-execute listener: the driver awaits it inside the
registry's own stage (before the body's dispatch, or after the body and before the result is
returned), with a `Listen` on the signal that stage sees, and then lets the call go on as
the stage's "carry on" answer (toolseam: ``await next()``, an ``Allow`` / ``Accept``)."""


@final
@dataclass(frozen=True, slots=True)
class Program:
    """A program for a code-running tool (capability ``ptc``), in no runtime's dialect.

    The driver writes it in its runtime's language, calling the scenario's tools as the
    runtime exposes them: first every call of `calls`, all made before any is awaited; then,
    if `await_calls`, those awaited together; then each call of `then`, made and awaited in
    turn; then, if `spin`, an endless loop. A failure of an awaited call is caught by the
    program and goes into its value. The program's value is the list of what its awaited
    calls gave, in that order: ``"done:<key>"``, or ``"error: <message>"``.
    """

    calls: tuple[Call, ...]
    """Calls made at once (several in flight)."""
    await_calls: bool = True
    """Await `calls` together before going on; ``False`` leaves them in flight."""
    then: tuple[Call, ...] = ()
    """Calls made one after another, each awaited, once `calls` are."""
    spin: bool = False
    """End in ``while True: pass``: a program that never ends by itself."""


@final
@dataclass(frozen=True, slots=True)
class Durable:
    """How a scenario runs as a durable workflow (capability ``durable``).

    The driver runs the scenario's calls (a batch) as one workflow of its durable engine, in
    a worker of this process, and wires the scenario's `Stop` to the engine's cancellation
    of that workflow, issued through its database as another process would (DBOS:
    ``DBOS.cancel_workflow``), never to a signal of its own. `Driver.run` returns once the
    workflow's execution has ended in the worker. When the workflow was cancelled, its
    outcomes are the ones *recorded in its journal*, one per recorded call (a call with
    none recorded is missing, or ``none``); otherwise, what the workflow's code was given.
    """

    then: Literal["return", "replay", "recover"] = "return"
    """What follows a workflow that completed. ``"return"``: nothing. ``"replay"``: it runs
    again from its journal, every step recorded (DBOS: a fork after its last step), and
    `Driver.run` returns what the replay's code was given. ``"recover"``: it is recovered as
    a crash of its worker while the body of its last call ran would leave it — the journal
    without that call's outcome, everything recorded before it kept (DBOS: a fork at the
    step of that outcome) — and `Driver.run` returns what the recovered execution's code
    was given. The scripted bodies report every run, so a body that runs again is seen."""

    timeout: float | None = None
    """The workflow's timeout, in seconds from its start (DBOS: ``SetWorkflowTimeout``), or
    ``None`` for none. Its deadline stops the calls in flight as a cancel does; `Driver.run`
    returns the outcomes the journal then holds, as after a cancel."""


McpStop: TypeAlias = Literal["cancel", "disconnect", "no-retry"]
"""What the MCP client does at the stop (capability ``mcp``): ``"cancel"`` the request
(2025-11-25 and stdio: ``notifications/cancelled``), or ``"disconnect"`` (close its
connection mid-call: over HTTP its connections dropped, over a stream transport its streams
closed). ``"no-retry"`` (capability ``mcp_input_required``, 2026-07-28): the
client takes the ``InputRequiredResult`` a body's question answers and never retries; the
server runs with a short input deadline, and the stop disconnects."""

CodeReturnScript: TypeAlias = Callable[[Collection[int]], None]
"""The kit's witness of a code call's return (capability ``ptc``): the driver calls it the
moment its code call returned (or raised, or let a host's cancellation go on), with the ids
of the processes that ran the program. The kit takes its sequence number and reads the
process table there and then: a driver may do more before `Driver.run` returns (close a
sandbox pool, which waits for whatever is left), and that must not count."""

ObserverScript: TypeAlias = Callable[[Outcome], None]
"""The kit's scripted result observer: the driver calls it from the registry's own result
observers with the result classified, and lets what it raises reach the registry."""


@final
class Scenario:
    """Everything one clause asks of a driver (built by the kit)."""

    __slots__ = (
        "_published",
        "approval",
        "around",
        "batch",
        "calls",
        "code_returned",
        "durable",
        "elicit",
        "handled",
        "max_parallel",
        "mcp",
        "observer",
        "post_execute",
        "pre_execute",
        "program",
        "progress",
        "stop",
        "tools",
    )

    def __init__(
        self,
        *,
        tools: Sequence[ScriptedTool],
        calls: Sequence[Call],
        batch: bool = False,
        max_parallel: int = 10,
        approval: ApprovalScript | None = None,
        around: WrapperScript | None = None,
        pre_execute: ListenerScript | None = None,
        post_execute: ListenerScript | None = None,
        observer: ObserverScript | None = None,
        progress: ProgressSink | None = None,
        elicit: ElicitationScript | None = None,
        program: Program | None = None,
        code_returned: CodeReturnScript | None = None,
        durable: Durable | None = None,
        mcp: McpStop | None = None,
        handled: Callable[[], None] | None = None,
    ) -> None:
        self.tools: Sequence[ScriptedTool] = tools
        """The scripted tools to register (fresh for every scenario)."""
        self.calls: Sequence[Call] = calls
        """The calls, in model order: one, unless ``batch``."""
        self.batch: bool = batch
        """Run ``calls`` through the registry's batch executor (capability ``batch``)."""
        self.max_parallel: int = max_parallel
        """The batch's parallelism, where the registry takes one."""
        self.approval: ApprovalScript | None = approval
        """Ask this approver before each call (capability ``approval``)."""
        self.around: WrapperScript | None = around
        """Wrap each call's dispatch in this (capability ``around_dispatch``)."""
        self.pre_execute: ListenerScript | None = pre_execute
        """Await this in the registry's pre-execute stage (capability ``pre_execute``)."""
        self.post_execute: ListenerScript | None = post_execute
        """Await this in the registry's post-execute stage (capability ``post_execute``)."""
        self.observer: ObserverScript | None = observer
        """Call this from the registry's result observers (capability ``result_observer``)."""
        self.progress: ProgressSink | None = progress
        """Hand every progress event the caller receives to this (capability ``progress``)."""
        self.elicit: ElicitationScript | None = elicit
        """Answer the bodies' elicitations with this (capability ``elicitation``); ``None``:
        the caller offers the call no elicitation at all."""
        self.program: Program | None = program
        """Run this program with the registry's code-running tool (capability ``ptc``): the
        one call of `calls` is that tool's call, and `tools` are what the program calls. `run`
        returns the code call's outcome, then one per nested call as the runtime reports it
        to the model (the nested call's id, as the runtime labelled it) — none for a call it
        says nothing about."""
        self.code_returned: CodeReturnScript | None = code_returned
        """Call this the moment the code call returns, with the sandbox's process ids."""
        self.durable: Durable | None = durable
        """Run ``calls`` as one durable workflow, as `Durable` says (capability
        ``durable``); `stop` is then the engine's cancellation of that workflow."""
        self.mcp: McpStop | None = mcp
        """Serve the tools from an MCP server and make the one call with the MCP SDK's
        client over the wire (capability ``mcp``); `stop` is then what this says the client
        does: ``"cancel"`` the request, or ``"disconnect"``. The server considers the call
        done when its ``tools/call`` handling ended (over a stream transport, after a
        disconnect, once the server's run also ended): the driver calls `handled` then."""
        self.handled: Callable[[], None] | None = handled
        """The kit's witness (capability ``mcp``): the driver calls it the moment the
        server's handling of the call ended (over a stream transport, after a disconnect: the
        server's run), in that same step; `Driver.run` may close the connection after it."""
        self.stop: Stop = Stop()
        """Wire this to the registry's cancellation before the calls start."""
        self._published: list[Outcome] = []

    def publish(self, outcome: Outcome) -> None:
        """Report a result the registry *published* (its result observers, callbacks).

        Optional: a registry with no way to announce results leaves it alone, and the kit
        judges the outcomes `Driver.run` returns. A registry that announces results should
        report every one, also when the awaiting task is cancelled (no outcome is returned
        then): that is how the kit sees one result per host-cancelled call.
        """
        self._published.append(outcome)


class Driver(Protocol):
    """Adapts one registry to the kit (contract §11).

    A driver is stateless between scenarios: `run` builds a fresh registry each time. It
    may also have a ``lacking`` attribute, ``{capability: why the registry lacks it}``,
    which the kit adds to the detail of a clause skipped for that capability, and a
    ``families`` attribute, the clause families (the id's part before the dot, ``{"mcp"}``)
    it measures: every other clause is skipped, saying so.
    """

    @property
    def subject(self) -> str:
        """The registry's name, for reports."""
        ...

    @property
    def capabilities(self) -> Collection[Capability]:
        """What the driver can do; the clauses needing anything else are skipped."""
        ...

    @property
    def backends(self) -> Sequence[str]:
        """The anyio backends the registry runs on (``"asyncio"``, ``"trio"``), first default."""
        ...

    def versions(self) -> Mapping[str, str]:
        """The versions measured: ``{distribution: version}``."""
        ...

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """Register the scenario's tools, run its calls, return one outcome per call.

        A call the registry gives no result for is an ``Outcome(call_id, "none", ...)``, or
        simply missing: the kit reports both. Host cancellation of the task awaiting this
        method must propagate (the kit checks that it does).
        """
        ...
