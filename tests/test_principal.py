"""Who is calling (contract §14): `Principal`, ``principal`` on every view, per-tool scopes.

A call made with a principal that lacks one of its tool's scopes is denied at entry: no
pre-execute listener, guard, wrapper or body runs; the denial goes through post-execute and
is published like any denial. A call without a principal (an in-process caller) is not
checked.
"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest
from typing_extensions import TypedDict

from support import Published, TextArgs, code_of, make_input
from toolseam import (
    AbortController,
    Accept,
    Next,
    PostDecision,
    PreDecision,
    Principal,
    ToolCall,
    ToolDispatchExecution,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
    nested_input,
    run_tool_calls,
)
from toolseam.reference import ReferenceRegistry

ALICE = Principal("alice", ["files:read"], {"tenant": "a", "groups": ["x"]})
ROOT = Principal("root", ["files:read", "files:write"])
DENIED_WRITE = "tool call denied: the caller lacks the scope files:write"


class Calls:
    """A registry with a scoped ``delete``, an open ``echo``, and a log of every stage."""

    def __init__(self, registry: Any = None) -> None:
        self.registry = ToolRegistry() if registry is None else registry
        self.stages: list[str] = []
        self.principals: list[Principal | None] = []
        self.published = Published()

        @define_tool(name="delete", description="Delete a file.", scopes=["files:write"])
        async def delete(args: TextArgs, exec: ToolRunContext) -> str:
            self.stages.append("body")
            self.principals.append(exec.principal)
            return "deleted"

        @define_tool(name="echo", description="Echo the text.")
        async def echo(args: TextArgs, exec: ToolRunContext) -> str:
            self.stages.append("body")
            self.principals.append(exec.principal)
            return args["text"]

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            self.stages.append("pre")
            return await next()

        def guard(exec: ToolExecution) -> str | None:
            self.stages.append("guard")
            return None

        async def wrapper(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            self.stages.append("wrapper")
            return await next()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            self.stages.append("post")
            return Accept()

        self.registry.register(delete)
        self.registry.register(echo)
        self.registry.on_pre_execute(pre)
        self.registry.add_guard(guard)
        self.registry.on_execute(wrapper)
        self.registry.on_post_execute(post)
        self.registry.on_result(self.published)


class TestPrincipal:
    def test_it_is_frozen_and_keeps_a_snapshot_of_the_claims(self) -> None:
        claims: dict[str, Any] = {"groups": ["a"]}
        principal = Principal("alice", ["read", "read"], claims)
        claims["groups"].append("b")
        assert principal.claims == {"groups": ["a"]}
        assert principal.scopes == frozenset({"read"})
        with pytest.raises(dataclasses.FrozenInstanceError):
            principal.name = "mallory"  # type: ignore[misc]
        with pytest.raises(TypeError):
            principal.claims["groups"] = []  # type: ignore[index]

    def test_its_repr_leaves_the_claims_out(self) -> None:
        principal = Principal("alice", ["read"], {"email": "alice@example.org"})
        assert repr(principal) == "Principal(name='alice', scopes=frozenset({'read'}))"

    def test_it_is_hashable_and_compared_by_value(self) -> None:
        assert Principal("a", ["x"], {"k": 1}) == Principal("a", ("x",), {"k": 1})
        assert Principal("a", ["x"], {"k": 1}) != Principal("a", ["x"], {"k": 2})
        assert len({Principal("a", ["x"]), Principal("a", ["x"])}) == 1
        assert pickle.loads(pickle.dumps(ALICE)) == ALICE

    @pytest.mark.parametrize(
        ("arguments", "error", "message"),
        [
            (("",), TypeError, r"^Principal: `name` must be a non-empty str, got ''$"),
            ((1,), TypeError, r"^Principal: `name` must be a non-empty str, got '1'$"),
            (
                ("a", "read"),
                TypeError,
                r"^Principal: `scopes` must be an iterable of scope names \(not a single str\)",
            ),
            (("a", [1]), TypeError, r"^Principal: every scope must be a str, got int$"),
            (("a", ["two words"]), ValueError, r"^Principal: a scope must be non-empty"),
            (("a", [""]), ValueError, r"^Principal: a scope must be non-empty"),
            (("a", (), {"when": object()}), TypeError, r"^Principal: `claims` must be a JSON"),
            (("a", (), [1]), TypeError, r"^Principal: `claims` must be a JSON object"),
        ],
    )
    def test_a_malformed_principal_is_refused(
        self, arguments: tuple[Any, ...], error: type[Exception], message: str
    ) -> None:
        with pytest.raises(error, match=message):
            Principal(*arguments)


class TestEveryViewReadsIt:
    async def test_every_stage_sees_the_callers_principal(self) -> None:
        seen: dict[str, Principal | None] = {}
        registry = ToolRegistry()

        @define_tool(name="echo", description="")
        async def echo(args: TextArgs, exec: ToolRunContext) -> str:
            seen["body"] = exec.principal
            return "ok"

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            seen["pre"] = exec.principal
            return await next()

        def guard(exec: ToolExecution) -> str | None:
            seen["guard"] = exec.principal
            return None

        async def wrapper(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            seen["wrapper"] = exec.principal
            return await next()

        registry.register(echo)
        registry.on_pre_execute(pre)
        registry.add_guard(guard)
        registry.on_execute(wrapper)
        registry.on_result(lambda exec, result: seen.__setitem__("observer", exec.principal))
        await registry.execute(make_input("echo", principal=ALICE))
        assert seen == dict.fromkeys(["pre", "guard", "wrapper", "body", "observer"], ALICE)
        await registry.execute(make_input("echo"))
        assert set(seen.values()) == {None}

    async def test_no_stage_can_replace_or_delete_it(self) -> None:
        errors: list[str] = []
        registry = ToolRegistry()

        @define_tool(name="echo", description="")
        async def echo(args: TextArgs, exec: ToolRunContext) -> str:
            for attempt in (
                lambda: setattr(exec, "principal", ROOT),
                lambda: delattr(exec, "principal"),
            ):
                try:
                    attempt()
                except AttributeError as error:
                    errors.append(str(error))
            return "ok"

        async def wrapper(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            try:
                exec.principal = ROOT  # type: ignore[misc]
            except AttributeError as error:
                errors.append(str(error))
            return await next()

        registry.register(echo)
        registry.on_execute(wrapper)
        result = await registry.execute(make_input("echo", principal=ALICE))
        assert not result.is_error
        assert errors == [
            "ToolDispatchExecution.principal is read-only",
            "ToolExecution.principal is read-only",
            "ToolExecution.principal is read-only",
        ]

    def test_the_input_keeps_it_read_only(self) -> None:
        made = make_input("echo", principal=ALICE)
        assert made.principal is ALICE
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.principal = ROOT  # type: ignore[misc]
        assert dataclasses.replace(made, principal=None).principal is None

    async def test_a_principal_that_is_not_one_fails_the_call(self) -> None:
        calls = Calls()
        result = await calls.registry.execute(make_input("echo", principal="root"))
        assert result.is_error
        assert result.error.message == "ToolExecutionInput.principal must be a Principal, got str"
        assert calls.stages == []


class TestScopes:
    async def test_a_principal_without_the_scope_is_denied_before_any_stage(self) -> None:
        """The attacker's call: no pre-execute, guard, wrapper, body; post and observers run."""
        calls = Calls()
        result = await calls.registry.execute(make_input("delete", principal=ALICE))
        assert result.is_error
        assert result.error.message == DENIED_WRITE
        assert calls.stages == ["post"]
        assert calls.published.only is result

    async def test_a_principal_with_the_scopes_runs_the_tool(self) -> None:
        calls = Calls()
        result = await calls.registry.execute(make_input("delete", principal=ROOT))
        assert not result.is_error
        assert calls.stages == ["pre", "guard", "wrapper", "body", "post"]
        assert calls.principals == [ROOT]

    async def test_an_in_process_caller_is_not_checked(self) -> None:
        calls = Calls()
        result = await calls.registry.execute(make_input("delete"))
        assert not result.is_error
        assert calls.principals == [None]

    async def test_a_tool_without_scopes_runs_for_any_principal(self) -> None:
        calls = Calls()
        result = await calls.registry.execute(make_input("echo", principal=Principal("guest")))
        assert not result.is_error

    async def test_a_pre_aborted_call_stays_aborted_before_dispatch(self) -> None:
        calls = Calls()
        controller = AbortController()
        controller.abort()
        result = await calls.registry.execute(
            make_input("delete", principal=ALICE, signal=controller.signal)
        )
        assert code_of(result) == "ABORTED_BEFORE_DISPATCH"
        assert calls.stages == []

    async def test_several_missing_scopes_are_named_in_order(self) -> None:
        registry = ToolRegistry()

        @define_tool(name="admin", description="", scopes=["b:write", "a:write", "files:read"])
        async def admin(args: TextArgs, exec: ToolRunContext) -> str:
            raise AssertionError("the body must not run")

        registry.register(admin)
        result = await registry.execute(make_input("admin", principal=ALICE))
        assert result.is_error
        assert (
            result.error.message == "tool call denied: the caller lacks the scopes a:write, b:write"
        )

    async def test_nested_calls_carry_the_principal_and_are_checked(self) -> None:
        calls = Calls()
        nested: list[ToolResult] = []

        @define_tool(name="composite", description="")
        async def composite(args: TextArgs, exec: ToolRunContext) -> str:
            call = nested_input(exec, call_id="n1", name="delete", arguments={"text": "x"})
            assert call.principal is exec.principal
            nested.append(await calls.registry.execute(call))
            return "done"

        calls.registry.register(composite)
        await calls.registry.execute(make_input("composite", principal=ALICE))
        [denied] = nested
        assert denied.is_error
        assert denied.error.message == DENIED_WRITE
        assert "deleted" not in calls.stages

    async def test_a_batch_checks_every_call(self) -> None:
        calls = Calls()
        outcomes = await run_tool_calls(
            calls.registry,
            [ToolCall("c1", "delete", {"text": "x"}), ToolCall("c2", "echo", {"text": "y"})],
            signal=AbortController().signal,
            principal=ALICE,
        )
        assert [o.result.is_error for o in outcomes] == [True, False]
        assert outcomes[0].result.error.message == DENIED_WRITE  # type: ignore[union-attr]
        assert calls.principals == [ALICE]

    async def test_the_reference_pipeline_denies_the_same_call(self) -> None:
        fast, reference = Calls(), Calls(ReferenceRegistry())
        for calls in (fast, reference):
            for principal in (ALICE, ROOT, None):
                await calls.registry.execute(make_input("delete", principal=principal))
        assert fast.published.results == reference.published.results
        assert fast.stages == reference.stages

    def test_schemas_list_only_what_the_principal_may_call(self) -> None:
        calls = Calls()
        assert [s.name for s in calls.registry.schemas()] == ["delete", "echo"]
        assert [s.name for s in calls.registry.schemas(principal=ALICE)] == ["echo"]
        assert [s.name for s in calls.registry.schemas(principal=ROOT)] == ["delete", "echo"]

    async def test_unregistering_a_tool_forgets_its_scopes(self) -> None:
        registry = ToolRegistry()

        @define_tool(name="t", description="", scopes=["x"])
        async def scoped(args: TextArgs, exec: ToolRunContext) -> str:
            return "scoped"

        @define_tool(name="t", description="")
        async def open_(args: TextArgs, exec: ToolRunContext) -> str:
            return "open"

        registry.register(scoped).remove()
        registry.register(open_)
        result = await registry.execute(make_input("t", principal=ALICE))
        assert not result.is_error
        assert [s.name for s in registry.schemas(principal=ALICE)] == ["t"]


class TestDeclaringScopes:
    def test_define_tool_keeps_them(self) -> None:
        @define_tool(name="t", description="", scopes=("a", "b", "a"))
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            return ""

        assert tool.scopes == frozenset({"a", "b"})  # type: ignore[attr-defined]

    @pytest.mark.parametrize(
        ("scopes", "error", "message"),
        [
            ("admin", TypeError, r'^tool "t": `scopes` must be an iterable of scope names'),
            ([None], TypeError, r'^tool "t": every scope must be a str, got NoneType$'),
            (["a b"], ValueError, r"^tool \"t\": a scope must be non-empty, without whitespace"),
        ],
    )
    def test_define_tool_refuses_malformed_ones(
        self, scopes: Any, error: type[Exception], message: str
    ) -> None:
        with pytest.raises(error, match=message):
            define_tool(name="t", description="", scopes=scopes)

    async def test_a_hand_written_definition_may_declare_them(self) -> None:
        class Args(TypedDict):
            text: str

        @define_tool(name="t", description="")
        async def inner(args: Args, exec: ToolRunContext) -> str:
            return "ran"

        class Scoped:
            """A hand-written definition delegating to a define_tool one, plus scopes."""

            scopes = ("x:admin",)

            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

        registry = ToolRegistry()
        registry.register(Scoped())
        result = await registry.execute(make_input("t", principal=ALICE))
        assert result.is_error
        assert result.error.message == "tool call denied: the caller lacks the scope x:admin"

    def test_register_refuses_malformed_ones(self) -> None:
        @define_tool(name="t", description="")
        async def inner(args: TextArgs, exec: ToolRunContext) -> str:
            return ""

        class Bad:
            scopes = "admin"

            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

        with pytest.raises(TypeError, match=r'^tool "t": `scopes` must be an iterable'):
            ToolRegistry().register(Bad())
