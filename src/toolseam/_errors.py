"""Every exception toolseam raises or routes, and the codes results carry.

The exception tree::

    Exception
    ├── AbortError                 an operation stopped because its signal aborted
    └── ToolError                  routable: surfaces ErrorInfo(type name, code)
        ├── ToolNotFoundError      UNKNOWN_TOOL
        ├── ToolArgsError          INVALID_ARGS
        ├── ToolOutputError        INVALID_TOOL_OUTPUT
        └── ToolTimeoutError       TOOL_TIMEOUT

Any other exception raised by a tool or a stage surfaces only its message.
"""

from __future__ import annotations

from typing import Final, cast

__all__ = [
    "INVALID_ARGS",
    "INVALID_TOOL_OUTPUT",
    "TOOL_ABORTED",
    "TOOL_ABORTED_BEFORE_DISPATCH",
    "TOOL_ERROR_WITHOUT_CODE",
    "TOOL_TIMEOUT",
    "UNKNOWN_TOOL",
    "AbortError",
    "ToolArgsError",
    "ToolError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolTimeoutError",
]

TOOL_ABORTED: Final = "ABORTED"
"""The call was cancelled after the tool body was invoked: side effects were possible."""

TOOL_ABORTED_BEFORE_DISPATCH: Final = "ABORTED_BEFORE_DISPATCH"
"""The call was cancelled before the tool body was invoked: the body never ran."""

TOOL_TIMEOUT: Final = "TOOL_TIMEOUT"
"""The timeout policy's own deadline was the first abort of the call."""

UNKNOWN_TOOL: Final = "UNKNOWN_TOOL"
"""No tool of that name was registered when the call was dispatched."""

INVALID_ARGS: Final = "INVALID_ARGS"
"""The arguments did not validate against the tool's parameter schema."""

INVALID_TOOL_OUTPUT: Final = "INVALID_TOOL_OUTPUT"
"""The tool's output did not validate, or is not losslessly JSON-serializable."""

TOOL_ERROR_WITHOUT_CODE: Final = "TOOL_ERROR_WITHOUT_CODE"
"""A `ToolError` was raised with no code: none passed, and its class defines none."""


class AbortError(Exception):
    """An operation stopped because its abort signal aborted.

    This is the default abort reason of `AbortController.abort`, and what
    `AbortSignal.raise_if_aborted` raises when the reason is not an exception.

    Args:
        reason: The abort reason, when it is not itself an exception. ``None`` means
            "aborted without a reason".
    """

    reason: object = None
    """The non-exception abort reason this error wraps, or ``None``."""

    def __init__(self, reason: object = None) -> None:
        super().__init__() if reason is None else super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        reason = self.reason
        if reason is None:
            return "operation aborted"
        text = safe_str(reason)
        if not text and issubclass(type(reason), BaseException):
            text = type_name(type(reason))  # KeyboardInterrupt() has no message
        return f"operation aborted: {text}"


class ToolError(Exception):
    """Base of the routable tool errors.

    Raise a `ToolError` (or a subclass) from a tool body or a stage to give the result an
    `ErrorInfo` of ``(type(error).__name__, error.code)``; any other exception surfaces only
    its message. A subclass may fix its code as a class attribute instead of passing it::

        class QuotaExceeded(ToolError):
            code = "QUOTA_EXCEEDED"

        raise QuotaExceeded("daily quota used up")

    Args:
        message: What went wrong, for the model and for humans.
        code: A stable machine-readable code, such as `INVALID_ARGS`. Left out, the
            class attribute ``code`` is used; where the class has none either, the code is
            `TOOL_ERROR_WITHOUT_CODE`, so the result still carries the tool's message and
            names the class (``ErrorInfo("DiskFull", "TOOL_ERROR_WITHOUT_CODE")``). Neither
            defining a subclass nor raising it ever raises anything else.
    """

    message: str
    """The message, as given."""
    code: str
    """The machine-readable code."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is None:
            # Never raise here: this runs where a tool raises its error, and a TypeError
            # would replace that error. A missing code is told in the result instead.
            fixed = getattr(type(self), "code", None)
            code = fixed if type(fixed) is str else TOOL_ERROR_WITHOUT_CODE
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return self.message


class ToolNotFoundError(ToolError):
    """No tool of the requested name is registered.

    Args:
        name: The requested tool name.
    """

    tool_name: str
    """The requested tool name."""

    def __init__(self, name: str) -> None:
        super().__init__(f'unknown tool "{name}"', code=UNKNOWN_TOOL)
        self.tool_name = name


class ToolArgsError(ToolError):
    """The arguments of a call did not validate.

    Args:
        message: What was wrong with them.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, code=INVALID_ARGS)


class ToolOutputError(ToolError):
    """A tool's output did not validate or cannot be serialized.

    Args:
        message: What was wrong with it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, code=INVALID_TOOL_OUTPUT)


class ToolTimeoutError(ToolError):
    """A tool call ran past the deadline of the timeout policy.

    Args:
        message: Which deadline passed.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, code=TOOL_TIMEOUT)


def safe_str(value: object) -> str:
    """Describe any value as an exact ``str`` without ever raising.

    Falls back from ``str`` to ``repr`` to the type name, because a hostile exception's
    ``__str__`` must not turn one failure into a crash of the registry. ``__str__`` may
    return a ``str`` subclass whose ``__format__`` or ``__hash__`` raises; the text is
    copied into a plain ``str`` so that formatting it later cannot raise.
    """
    for describe in (str, repr):
        try:
            text = describe(value)
            # str.__str__ copies a str subclass into an exact str without calling any
            # method the subclass overrides.
            return text if type(text) is str else str.__str__(text)
        except Exception:
            pass
    return f"<unprintable {type_name(type(value))}>"


def exact_str(value: object) -> str | None:
    """``value`` as an exact ``str`` if it is a ``str`` (or a subclass), else ``None``.

    Never calls a method of ``value``: a subclass's ``__hash__``, ``__eq__`` or
    ``__bool__`` may raise.
    """
    if type(value) is str:
        return value
    if issubclass(type(value), str):
        return str.__str__(cast("str", value))
    return None


def type_name(kind: type) -> str:
    """The name of a type, without ever raising (a metaclass may break ``__name__``)."""
    try:
        name = kind.__name__
    except Exception:
        return "<unnamed type>"
    return name if type(name) is str else "<unnamed type>"
