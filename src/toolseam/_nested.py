"""Nested dispatch: a tool that calls other tools passes its own signal explicitly."""

from __future__ import annotations

from ._views import ToolExecution, ToolExecutionInput

__all__ = ["nested_input"]


def nested_input(
    exec: ToolExecution, *, call_id: str, name: str, arguments: object
) -> ToolExecutionInput:
    """Build the input of a call made from inside a tool body.

    Forwards ``signal=exec.signal`` (so aborting the outer call reaches the nested body),
    ``parent=exec.token``, ``root_call_id``, ``agent``, ``host`` (so the nested body's
    progress and logs reach the outer caller, and it may ask that caller too) and
    ``principal`` (the nested call is checked against its tool's scopes as the outer one
    was). Nothing is ambient: a composite tool hands this input to ``registry.execute``
    itself.

    Args:
        exec: The calling tool's execution (its ``ToolRunContext``).
        call_id: The nested call's own id.
        name: The tool to call.
        arguments: Its JSON-like arguments.
    """
    return ToolExecutionInput(
        call_id=call_id,
        name=name,
        arguments=arguments,
        signal=exec.signal,
        root_call_id=exec.root_call_id,
        agent=exec.agent,
        parent=exec.token,
        host=exec.host,
        principal=exec.principal,
    )
