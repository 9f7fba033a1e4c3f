"""A body's questions over MCP 2026-07-28: suspended at its question, never run twice.

In the 2026-07-28 revision a server cannot send its client requests during a call. To ask
(``elicitation/create``, ``sampling/createMessage``, ``roots/list``) it answers the call with
an ``InputRequiredResult`` carrying the questions and a ``requestState``; the client retries
the same call with the answers and that state (SEP-2322). The SDK's own servers run the
handler again on the retry, which would repeat every side effect the body had before its
question. toolseam does not:

- A ``tools/call`` of a 2026-07-28 client runs its body in a task of the server's lifespan
  (`RoundsGroup`), not in the request's task. The request waits for the body to return or
  to ask; when it asks, the request is answered ``InputRequiredResult`` and the body stays
  suspended at its question (`RoundCall`, *parked*).
- The retry names the call by its state (``_state``: signed, bound to the call, the round,
  the tool, its arguments and the caller): its answers resume *that* body, and the request
  waits again. The call ends in exactly one result, the answer of the last request.
- A tampered, replayed or foreign state is refused (``-32602``) and neither resumes nor
  starts a body. A state from another server process (a restart, another worker) is refused
  too, except for a tool declared ``idempotent=True``: it runs afresh, its questions
  answered from the retry's answers by key.
- A parked call whose retry does not come within the deadline (`INPUT_DEADLINE`, or
  ``create_server(input_deadline=...)``) is aborted through its signal, awaited, and its
  ``ABORTED`` result published to the registry's observers (nobody is left to answer).
- While a request serves the call, the SDK cancelling it (the client closed the request's
  stream) or the client going away aborts the call, as on the handshake revisions.
- The server's lifespan ending (the connection, or shutdown) aborts every parked call and
  awaits it.
- At most `MAX_SUSPENDED` calls of one server wait for a retry at once, and at most
  `MAX_SUSPENDED_PER_PRINCIPAL` of one authenticated principal; beyond, a body's question
  fails ``CAPABILITY_UNAVAILABLE`` saying so (it is never parked), so clients that never
  retry cannot pile up suspended bodies without bound, nor one principal take the room
  every other principal's questions need.

Questions asked together (a body's task group) go out in one round: once a question is
asked, the request gives the body's other tasks a few scheduling passes to ask theirs.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast, final

import anyio
import anyio.abc
import anyio.lowlevel
from mcp import types
from mcp.server.context import ServerRequestContext
from pydantic import BaseModel, ValidationError

from .._capabilities import CAPABILITY_UNAVAILABLE
from .._definitions import is_idempotent
from .._errors import ToolError
from .._registry import ToolRegistry
from .._results import ToolResult
from .._signals import AbortController, AbortSignal, in_loop
from .._views import ToolExecutionInput, ToolHost
from ._host import missing_capability_error
from ._state import Claims, Foreign, StateKey, arguments_digest, refused
from ._wire import call_tool_result

if TYPE_CHECKING:
    from ._host import RequestHost
    from ._server import ClientGone, RunningCalls

__all__ = [
    "INPUT_DEADLINE",
    "MAX_SUSPENDED",
    "MAX_SUSPENDED_PER_PRINCIPAL",
    "Kind",
    "MakeInput",
    "RoundCall",
    "Rounds",
    "check_deadline",
]

INPUT_DEADLINE: Final = 600.0
"""Seconds a suspended call waits for its client's retry before it is aborted (default).

The SDK's own request states live as long (``RequestStateSecurity(ttl=600)``).
"""

MAX_SUSPENDED: Final = 1024
# A suspended call keeps its body alive as a running call does: one authenticated principal
# gets at most this many (the default per-principal call cap, `HttpLimits`).
MAX_SUSPENDED_PER_PRINCIPAL: Final = 64
"""How many calls of one server may wait for their client's retry at once."""

Kind: TypeAlias = Literal["elicitation", "sampling", "roots"]

MakeInput: TypeAlias = Callable[
    [ServerRequestContext[Any], types.CallToolRequestParams, AbortSignal, ToolHost],
    ToolExecutionInput,
]
"""How the server makes a call's input (``_server``: the same as for any ``tools/call``)."""

_GROUP_KEY: Final = "toolseam.mcp.rounds"
# A task's name, given: anyio otherwise builds one from the function's module and qualname.
_TASK_NAME: Final = "toolseam.mcp call"
_BATCH_PASSES: Final = 8
_CANCELLED: Final = "the MCP request was cancelled"
_DISCONNECTED: Final = "the MCP client closed the request's stream"
_CLOSED: Final = "the MCP server is shutting down"
_STALE: Final = (
    "it was already answered, or the call it continues has ended (its deadline passed, or "
    "the server shut down)"
)

_ANSWERS: Final[Mapping[Kind, tuple[type[BaseModel], ...]]] = {
    "elicitation": (types.ElicitResult,),
    "sampling": (types.CreateMessageResult, types.CreateMessageResultWithTools),
    "roots": (types.ListRootsResult,),
}


def check_deadline(input_deadline: object) -> float:
    """``input_deadline`` checked: a positive, finite number of seconds."""
    if type(input_deadline) in (int, float):
        seconds = float(cast("float", input_deadline))
        if 0 < seconds < float("inf"):
            return seconds
    raise ValueError(
        f"`input_deadline` must be a positive number of seconds, got {input_deadline!r}"
    )


def _fit(kind: Kind, response: object) -> BaseModel | None:
    """The client's answer as the model its question expects, or ``None`` if it is not one."""
    data: object = (
        response.model_dump(by_alias=True, mode="json", exclude_none=True)
        if isinstance(response, BaseModel)
        else response
    )
    for model in _ANSWERS[kind]:
        try:
            return model.model_validate(data)
        except ValidationError:
            continue
    return None


@final
class _Question:
    """One question of a suspended call: answered, or withdrawn (``answer`` stays ``None``)."""

    __slots__ = ("answer", "done", "key", "kind", "refused", "request")

    kind: Kind

    def __init__(self, key: str, kind: Kind, request: types.InputRequest) -> None:
        self.key = key
        self.kind = kind
        self.request = request
        self.answer: BaseModel | None = None
        self.refused: str | None = None
        self.done = anyio.Event()


@final
class RoundsGroup:
    """The task group of one server lifespan: where the calls of 2026 clients run."""

    __slots__ = ("calls", "closing", "tg")

    def __init__(self, tg: anyio.abc.TaskGroup) -> None:
        self.tg = tg
        self.calls: set[RoundCall] = set()
        self.closing = False


@final
class RoundCall:
    """One ``tools/call`` of a 2026-07-28 client, across its rounds. Event loop thread only."""

    __slots__ = (
        "_asked",
        "_changed",
        "_digest",
        "_raw_arguments",
        "controller",
        "group",
        "host",
        "key",
        "parked",
        "preset",
        "principal",
        "questions",
        "result",
        "round",
        "serving",
        "timer",
        "tool",
    )

    def __init__(
        self,
        *,
        tool: str,
        arguments: object,
        principal: str | None,
        preset: Mapping[str, object],
        group: RoundsGroup,
    ) -> None:
        # Drawn when the call first parks (`Rounds._park`): only a parked call is named by a
        # state, and most calls never park.
        self.key: str | None = None
        self.tool = tool
        self._raw_arguments = arguments
        self._digest: str | None = None
        self.principal = principal
        self.preset = dict(preset)
        self.group = group
        self.controller = AbortController()
        self.host: RequestHost | None = None
        self.round = 0
        self.questions: dict[str, _Question] = {}
        self.result: ToolResult | None = None
        self.parked = False
        self.serving: object | None = None
        self.timer: anyio.CancelScope | None = None
        self._changed: anyio.Event | None = None
        self._asked = 0

    @property
    def arguments(self) -> str:
        """The digest of the call's arguments its states bind (computed when first needed)."""
        digest = self._digest
        if digest is None:
            digest = self._digest = arguments_digest(self._raw_arguments)
            self._raw_arguments = None
        return digest

    def _wake(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def wake(self) -> None:
        """Wake the request waiting in `outcome` (a notification was queued)."""
        self._wake()

    async def ask(
        self, key: str | None, kind: Kind, request: types.InputRequest, signal: AbortSignal
    ) -> BaseModel | None:
        """Ask the client (in the next ``InputRequiredResult``); ``None`` once withdrawn."""
        if key is None:
            self._asked += 1
            name = f"{kind}-{self._asked}"
        else:
            name = key
        if name in self.questions:
            raise ValueError(f"a request keyed {name!r} is already pending in this call")
        preset = self.preset.pop(name, None)
        if preset is not None:
            fitting = _fit(kind, preset)
            if fitting is not None:  # answered before it was asked (a fresh call with answers)
                await anyio.lowlevel.checkpoint()
                return fitting
        question = _Question(name, kind, request)
        self.questions[name] = question
        self._wake()
        registration = signal.add_listener(in_loop(lambda: self._withdraw(question)))
        try:
            await question.done.wait()
        finally:
            registration.remove()
            if self.questions.get(name) is question:
                del self.questions[name]
        if question.refused is not None:
            raise ToolError(question.refused, code=CAPABILITY_UNAVAILABLE)
        return question.answer

    def refuse(self, questions: list[_Question], why: str) -> None:
        """End these questions unasked: each ``ask`` raises ``CAPABILITY_UNAVAILABLE``."""
        for question in questions:
            if not question.done.is_set():
                question.refused = why
                question.done.set()
        self._wake()

    def _withdraw(self, question: _Question) -> None:
        if not question.done.is_set():
            question.done.set()
            self._wake()

    def withdraw_all(self) -> None:
        """Withdraw every pending question (the body returned, or the call aborted)."""
        for question in list(self.questions.values()):
            self._withdraw(question)

    def answer(self, responses: Mapping[str, object]) -> None:
        """Answer the pending questions the client answered; unknown keys are ignored.

        An answer that does not fit its question (an elicitation answered as a completion)
        leaves the question pending: it is asked again, as SEP-2322 recommends for a
        missing answer.
        """
        for name, response in responses.items():
            question = self.questions.get(name)
            if question is None or question.done.is_set():
                continue
            fitting = _fit(question.kind, response)
            if fitting is not None:
                question.answer = fitting
                question.done.set()
        self._wake()

    def finish(self, result: ToolResult) -> None:
        """The registry published the call's result."""
        self.result = result
        self._wake()

    def pending(self) -> list[_Question]:
        """The questions asked and not yet answered nor withdrawn."""
        return self._pending()

    def _pending(self) -> list[_Question]:
        return [question for question in self.questions.values() if not question.done.is_set()]

    async def outcome(
        self, send: Callable[[], Awaitable[None]] | None = None
    ) -> ToolResult | list[_Question]:
        """Wait for the call's result, or for questions to ask (never once it is aborted).

        ``send`` (the request's `RequestHost.send_queued`) sends the notifications queued
        meanwhile: the waiting request is the task that writes them.
        """
        batched = False
        while True:
            if send is not None:
                await send()
            if self.result is not None:
                return self.result
            pending = self._pending()
            if pending and not self.controller.signal.aborted:
                if batched:
                    return pending
                # Questions asked together go out together: let the body's other tasks run.
                for _ in range(_BATCH_PASSES):
                    before = len(self.questions)
                    await anyio.lowlevel.checkpoint()
                    if len(self.questions) == before:
                        break
                batched = True
                continue
            batched = False
            self._changed = changed = anyio.Event()
            await changed.wait()


@final
class Rounds:
    """The calls of 2026-07-28 clients of one server, and the key that signs their states."""

    __slots__ = (
        "_abort",
        "_calls",
        "_deadline",
        "_parked",
        "_parked_by",
        "_registry",
        "_running",
        "key",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        running: RunningCalls,
        deadline: float,
        abort: Callable[[AbortController, str], None],
    ) -> None:
        self._registry = registry
        self._running = running
        self._deadline = deadline
        self._abort = abort
        self._calls: dict[str, RoundCall] = {}
        self._parked = 0
        # The parked calls of each authenticated principal (its keyed digest).
        self._parked_by: dict[str, int] = {}
        self.key = StateKey()

    def _unpark(self, call: RoundCall) -> None:
        if call.parked:
            call.parked = False
            self._parked -= 1
            who = call.principal
            if who is not None:
                left = self._parked_by[who] - 1
                if left:
                    self._parked_by[who] = left
                else:
                    del self._parked_by[who]

    def _no_room(self, call: RoundCall) -> str | None:
        """Why ``call`` may not park now, or None."""
        if self._parked >= MAX_SUSPENDED:
            return (
                f"this MCP server already holds {MAX_SUSPENDED} calls waiting for their "
                "client's answers"
            )
        who = call.principal
        if who is not None and self._parked_by.get(who, 0) >= MAX_SUSPENDED_PER_PRINCIPAL:
            return (
                f"this MCP server already holds {MAX_SUSPENDED_PER_PRINCIPAL} calls of this "
                "principal waiting for their client's answers"
            )
        return None

    @asynccontextmanager
    async def lifespan(self, server: object) -> AsyncGenerator[dict[str, Any]]:
        """The server's lifespan: a task group for the calls; at its end, abort and await."""
        async with anyio.create_task_group() as tg:
            group = RoundsGroup(tg)
            try:
                yield {_GROUP_KEY: group}
            finally:
                group.closing = True
                for call in list(group.calls):
                    self._abort(call.controller, _CLOSED)
                for call in [call for call in self._calls.values() if call.group is group]:
                    self._unpark(call)
                    self._forget(call)
                # What is left to wait for: the bodies (shielded, told through their signals)
                # and the deadlines of parked calls, which end here.
                tg.cancel_scope.cancel()

    def _forget(self, call: RoundCall) -> None:
        if call.key is not None and self._calls.get(call.key) is call:
            del self._calls[call.key]

    async def handle(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        make_host: Callable[[ServerRequestContext[Any], RoundCall], RequestHost],
        make_input: MakeInput,
        gone: ClientGone | None,
        pre_cancelled: bool,
    ) -> types.CallToolResult | types.InputRequiredResult | None:
        """Serve one round of a call; ``None`` when this server has no lifespan to run it in."""
        lifespan: object = ctx.lifespan_context
        group: object = (
            cast("Mapping[str, object]", lifespan).get(_GROUP_KEY)
            if isinstance(lifespan, Mapping)
            else None
        )
        if not isinstance(group, RoundsGroup):
            return None
        responses: Mapping[str, object] = params.input_responses or {}
        principal = self.key.principal()
        state = params.request_state
        if state is None:
            # The arguments' digest is taken when the call first parks (most never do).
            call = self._start(ctx, params, group, principal, responses, make_host, make_input)
        else:
            claims = self.key.verify(state)
            if isinstance(claims, Foreign):
                definition = self._registry.get(params.name)
                if definition is None or not is_idempotent(definition):
                    raise refused(
                        "it was issued by another server process (this server restarted, or "
                        f'the retry reached another one), and tool "{params.name}" is not '
                        "idempotent: its call cannot continue here, and was not run again"
                    )
                call = self._start(ctx, params, group, principal, responses, make_host, make_input)
            else:
                digest = arguments_digest(params.arguments or {})
                call = self._resume(claims, params.name, digest, principal)
                call.answer(responses)
        if pre_cancelled:
            self._abort(call.controller, _CANCELLED)
        return await self._serve(ctx, call, gone)

    def _start(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        group: RoundsGroup,
        principal: str | None,
        preset: Mapping[str, object],
        make_host: Callable[[ServerRequestContext[Any], RoundCall], RequestHost],
        make_input: MakeInput,
    ) -> RoundCall:
        call = RoundCall(
            tool=params.name,
            arguments=params.arguments or {},
            principal=principal,
            preset=preset,
            group=group,
        )
        host = call.host = make_host(ctx, call)
        execution = make_input(ctx, params, call.controller.signal, host.host)
        group.calls.add(call)
        self._running.enter(call.controller)  # aborts it at once if the server is closing
        if group.closing:
            self._abort(call.controller, _CLOSED)
        group.tg.start_soon(self._run, call, execution, name=_TASK_NAME)
        return call

    def start_task(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        make_host: Callable[[ServerRequestContext[Any], RoundCall], RequestHost],
        make_input: MakeInput,
    ) -> RoundCall | None:
        """Start a call no request waits for (a task, ``_tasks``); ``None`` without a lifespan.

        It runs in the server's lifespan like any 2026 call, under its own controller; its
        questions wait in ``questions`` for ``answer`` (``tasks/update``), with no deadline
        but the task's own cancel and the server's end.
        """
        lifespan: object = ctx.lifespan_context
        group: object = (
            cast("Mapping[str, object]", lifespan).get(_GROUP_KEY)
            if isinstance(lifespan, Mapping)
            else None
        )
        if not isinstance(group, RoundsGroup):
            return None
        call = RoundCall(
            tool=params.name,
            arguments=params.arguments or {},
            principal=self.key.principal(),
            preset={},
            group=group,
        )
        host = call.host = make_host(ctx, call)
        execution = make_input(ctx, params, call.controller.signal, host.host)
        group.calls.add(call)
        self._running.enter(call.controller)  # aborts it at once if the server is closing
        if group.closing:
            self._abort(call.controller, _CLOSED)
        group.tg.start_soon(self._run, call, execution, name=_TASK_NAME)
        return call

    def resume_task(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> RoundCall:
        """Resume a suspended call with the retry's answers, to go on as a task (``_tasks``).

        The retry is checked as any other (its state signed, for this call and round, not
        replayed); a state from another server process is refused, whatever the tool.
        """
        state = params.request_state
        assert state is not None
        claims = self.key.verify(state)
        if isinstance(claims, Foreign):
            raise refused(
                "it was issued by another server process (this server restarted, or the "
                "retry reached another one): its call cannot continue here, and was not run again"
            )
        digest = arguments_digest(params.arguments or {})
        call = self._resume(claims, params.name, digest, self.key.principal())
        self._forget(call)  # a task from now on: no request state names it any more
        call.answer(params.input_responses or {})
        host = call.host
        assert host is not None
        host.rebind(ctx)
        return call

    def _resume(self, claims: Claims, tool: str, digest: str, principal: str | None) -> RoundCall:
        same_caller = (claims.principal is None and principal is None) or (
            claims.principal is not None
            and principal is not None
            and hmac.compare_digest(claims.principal, principal)
        )
        if (
            claims.tool != tool
            or not hmac.compare_digest(claims.arguments, digest)
            or not same_caller
        ):
            raise refused(
                "it was issued for another tool call (the tool, its arguments or the caller differ)"
            )
        call = self._calls.get(claims.call)
        if call is None or not call.parked or claims.round != call.round:
            raise refused(_STALE)
        self._unpark(call)  # claimed: a second retry with the same state is a replay
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None
        return call

    async def _run(self, call: RoundCall, execution: ToolExecutionInput) -> None:
        """Run the call to its one result, shielded: it stops through its signal only."""
        host = call.host
        assert host is not None
        result: ToolResult | None = None
        try:
            with anyio.CancelScope(shield=True):
                result = await self._registry.execute(execution)
                call.withdraw_all()  # asked from a task that outlived the body
                await host.settle()
        finally:
            self._running.leave(call.controller)
            call.group.calls.discard(call)
        assert result is not None  # nothing cancels the shielded scope itself
        call.finish(result)
        host.detach()  # no cycle left between the call and its host
        if call.serving is None and not call.parked:
            self._forget(call)  # its request was cancelled: nobody will ever take the result

    async def _serve(
        self, ctx: ServerRequestContext[Any], call: RoundCall, gone: ClientGone | None
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One request's share of a call: until the call's result, or its next questions."""
        host = call.host
        assert host is not None
        host.rebind(ctx)
        token = object()
        call.serving = token
        controller = call.controller

        def client_gone() -> None:
            if call.serving is token:
                self._abort(controller, _DISCONNECTED)

        if gone is not None:
            gone.on_gone(client_gone)
        outcome: ToolResult | list[_Question] | None = None
        # No task of its own: the body runs in the lifespan's task group, so this request
        # waits for it unshielded, sending the call's notifications meanwhile. The SDK's
        # cancellation of the request lands in that wait; it aborts the call, whose result
        # is then awaited shielded (the body is told through its signal, never abandoned).
        try:
            try:
                outcome = await call.outcome(host.send_queued)
                while not isinstance(outcome, ToolResult):
                    full = self._no_room(call)
                    if full is None:
                        break
                    call.refuse(outcome, full)
                    outcome = await call.outcome(host.send_queued)
                await host.send_queued()
            except anyio.get_cancelled_exc_class():
                if call.serving is token:
                    self._abort(controller, _CANCELLED)
                with anyio.CancelScope(shield=True):
                    outcome = await call.outcome()
                host.drop_later()
                raise
            if isinstance(outcome, ToolResult):
                host.drop_later()
            else:
                host.keep_later()
        finally:
            call.serving = None
            if call.result is not None:
                self._forget(call)
        if isinstance(outcome, ToolResult):
            refusal = missing_capability_error(host, outcome)
            if refusal is not None:
                raise refusal
            return call_tool_result(outcome)
        assert outcome is not None
        return self._park(call, outcome)

    def _park(self, call: RoundCall, questions: list[_Question]) -> types.InputRequiredResult:
        call.round += 1
        key = call.key
        if key is None:  # its first question: from now on a state may name it
            key = call.key = secrets.token_urlsafe(16)
            self._calls[key] = call
        state = self.key.sign(Claims(key, call.round, call.tool, call.arguments, call.principal))
        call.parked = True
        self._parked += 1
        who = call.principal
        if who is not None:
            self._parked_by[who] = self._parked_by.get(who, 0) + 1
        call.timer = timer = anyio.CancelScope()
        call.group.tg.start_soon(self._expire, call, call.round, timer)
        return types.InputRequiredResult(
            input_requests={question.key: question.request for question in questions},
            request_state=state,
        )

    async def _expire(self, call: RoundCall, round: int, timer: anyio.CancelScope) -> None:
        with timer:
            await anyio.sleep(self._deadline)
        if not call.parked or call.round != round:
            return  # the retry came
        self._unpark(call)
        self._forget(call)
        if call.result is None:
            self._abort(
                call.controller,
                f"no retry answered the MCP client's input request within {self._deadline:g} s",
            )
