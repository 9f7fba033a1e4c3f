"""A composite tool that fans out to nested tool calls and stops them all on abort.

Run it: ``python docs/examples/composite_tool.py``.
"""

from __future__ import annotations

import anyio
from typing_extensions import TypedDict

from toolseam import (
    AbortController,
    ToolExecution,
    ToolExecutionInput,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
    nested_input,
)


class FetchArgs(TypedDict):
    url: str


class CrawlArgs(TypedDict):
    urls: list[str]


registry = ToolRegistry()


@define_tool(name="fetch", description="Fetch one URL.")
async def fetch(args: FetchArgs, exec: ToolRunContext) -> str:
    await exec.signal.wait()  # a slow download that honours its signal
    exec.signal.raise_if_aborted()
    return ""


@define_tool(name="crawl", description="Fetch many URLs concurrently.")
async def crawl(args: CrawlArgs, exec: ToolRunContext) -> list[str]:
    results: dict[str, ToolResult] = {}

    async def one(index: int, url: str) -> None:
        # nested_input forwards exec.signal, parent=exec.token, root_call_id and agent:
        # aborting the crawl aborts every fetch, and observers can rebuild the call tree.
        call = nested_input(
            exec, call_id=f"{exec.call_id}/{index}", name="fetch", arguments={"url": url}
        )
        results[url] = await registry.execute(call)

    async with anyio.create_task_group() as tg:
        for index, url in enumerate(args["urls"]):
            tg.start_soon(one, index, url)
    exec.signal.raise_if_aborted()
    return [url for url, result in results.items() if isinstance(result, ToolSuccess)]


published: list[tuple[bool, str, str]] = []  # (nested?, call id, code), as published


def record(exec: ToolExecution, result: ToolResult) -> None:
    code = (result.code or "ERROR") if isinstance(result, ToolFailure) else "OK"
    published.append((exec.parent is not None, exec.call_id, code))


registry.register(fetch)
registry.register(crawl)
registry.on_result(record)


async def main() -> None:
    stop = AbortController()
    call = ToolExecutionInput(
        call_id="crawl-1",
        name="crawl",
        arguments={"urls": ["https://a.example", "https://b.example", "https://c.example"]},
        signal=stop.signal,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(registry.execute, call)
        await anyio.wait_all_tasks_blocked()  # three fetches are in flight
        stop.abort("user pressed stop")
    # The nested calls publish in no fixed order: print them sorted, then the crawl itself.
    for nested, call_id, code in sorted(published, key=lambda row: (not row[0], row[1])):
        print(f"{call_id:<10} parent={'yes' if nested else 'no':<3} {code}")
    # -> crawl-1/0  parent=yes ABORTED
    # -> crawl-1/1  parent=yes ABORTED
    # -> crawl-1/2  parent=yes ABORTED
    # -> crawl-1    parent=no  ABORTED


if __name__ == "__main__":
    anyio.run(main)
