"""A composite tool that fans out to nested tool calls and stops them all on abort.

Run it: ``python docs/examples/composite_tool.py``.
"""

from __future__ import annotations

import anyio
from typing_extensions import TypedDict

from toolseam import (
    AbortController,
    ToolExecutionInput,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
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
    return [url for url, result in results.items() if not result.is_error]


registry.register(fetch)
registry.register(crawl)
registry.on_result(
    lambda exec, result: print(
        f"{exec.call_id:<10} parent={'yes' if exec.parent else 'no ':<3} "
        f"{result.error.info.code if result.is_error and result.error.info else 'OK'}"
    )
)


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


if __name__ == "__main__":
    anyio.run(main)
