"""A conformance driver as a third party writes one: public names only, under 100 lines.

It drives toolseam's `ToolRegistry` for single calls (async and thread bodies, host
cancellation, timeouts); clauses needing a capability it lacks are skipped.
"""

from collections.abc import Collection, Mapping, Sequence
from typing import NoReturn

import anyio
from typing_extensions import TypedDict

import toolseam as ts
from toolseam.conformance import Call, Capability, Outcome, Scenario, ScriptedTool, run_clauses


class Args(TypedDict):
    key: str


def outcome(call_id: str, result: ts.ToolResult) -> Outcome:
    if isinstance(result, ts.ToolSuccess):
        return Outcome(call_id, "ok", value=result.value)
    assert isinstance(result, ts.ToolFailure)
    if result.code == ts.TOOL_ABORTED:
        return Outcome(call_id, "aborted")
    if result.code == ts.TOOL_ABORTED_BEFORE_DISPATCH:
        return Outcome(call_id, "aborted_before_dispatch")
    if result.code == ts.TOOL_TIMEOUT:
        return Outcome(call_id, "timeout", result.error.message)
    return Outcome(call_id, "error", result.error.message)


class Listen:
    def __init__(self, signal: ts.AbortSignal) -> None:
        self.signal = signal

    def is_told(self) -> bool:
        return self.signal.aborted

    async def wait(self) -> None:
        await self.signal.wait()

    def stop(self) -> NoReturn:
        raise ts.AbortError()

    def fail(self, message: str) -> NoReturn:
        raise ts.ToolError(message, code="FAILED")

    async def call(self, call: Call) -> Outcome:
        raise NotImplementedError  # no `nested` capability


def register(registry: ts.ToolRegistry, tool: ScriptedTool) -> None:
    tag = ts.define_tool(name=tool.name, description=tool.description, timeout=tool.timeout)
    if tool.sync:

        def sync_body(args: Args, exec: ts.ToolRunContext) -> str:
            return tool.run_sync(args, Listen(exec.signal))

        registry.register(tag(sync_body))
    else:

        async def body(args: Args, exec: ts.ToolRunContext) -> str:
            return await tool.run(args, Listen(exec.signal))

        registry.register(tag(body))


class MyDriver:
    subject = "my registry"
    capabilities: Collection[Capability] = ("host_cancel", "sync_bodies", "timeouts")
    backends: Sequence[str] = ("asyncio", "trio")

    def versions(self) -> Mapping[str, str]:
        return {"my-registry": "1.0"}

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        registry = ts.ToolRegistry()
        for tool in scenario.tools:
            register(registry, tool)
        registry.on_result(lambda exec, result: scenario.publish(outcome(exec.call_id, result)))
        controller = ts.AbortController()
        scenario.stop.connect(controller.abort)
        (call,) = scenario.calls
        arguments, signal = dict(call.arguments), controller.signal
        input = ts.ToolExecutionInput(
            call_id=call.call_id, name=call.tool, arguments=arguments, signal=signal
        )
        return [outcome(call.call_id, await registry.execute(input))]


async def main() -> None:
    report = await run_clauses(MyDriver())
    print({s: sum(c.status == s for c in report.clauses) for s in ("pass", "fail", "skip")})
    # -> {'pass': 24, 'fail': 0, 'skip': 43}


anyio.run(main)
