"""The MCP server: pymem's verbs as tools, with identity from a token or the process, never from arguments.

Tools: remember (the write gate: its decision, admitted or quarantined, with the reason and score; a
refusal is a tool error naming the reason), list_quarantined, release_quarantined and
reject_quarantined (the notes the gate held; deciding one is an operator's), recall (kept and
withheld), deliver (the block a turn receives; starts the session on first use), get, list, erase
(content gone, hash and reason chained; the HTTP verb of the same name, per id), supersede; and the
tools for lessons, convention receipts and shared facts (pymem.mcp.lesson_tools). One tool per
verb, no aliases, and a description for every parameter. Each runs one verb of pymem.service.verbs
through the Service, so a tool answers what the HTTP call and the library call answer. Records come
back without their vectors.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.provider import TokenVerifier as SDKTokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context as ToolContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import AnyHttpUrl, Field

from ..context import Context
from ..errors import MemoryAdmissionError, NotFound, PymemError, Unauthenticated, UnknownSession
from ..service.auth import TokenVerifier, context_from_claims
from ..service.failures import log_unexpected
from ..service.verbs import REFUSED_ARGS, Service, version
from ..service.wire import bounded_message, code_for, retry_after
from ..vocabulary import ORIGINS, SURFACES, VECTOR_KEYS
from .lesson_tools import LESSON_TOOLS, register_lesson_tools

__all__ = ["build_mcp_server", "identity_from_request", "fixed_identity", "TOOLS"]

log = logging.getLogger("pymem.mcp")

Identity = Callable[[ToolContext], Context]
OriginName = Literal[ORIGINS]  # type: ignore[valid-type]  # a tuple subscript: one literal per origin
SurfaceName = Literal[SURFACES]  # type: ignore[valid-type]

INSTRUCTIONS = (
    "Long-term memory that knows where each memory came from. Use remember to keep "
    "something worth knowing in later conversations, saying where it came from: user_asserted when the "
    "user said it, model_inferred when you concluded it, tool_output with a citation. Instruction-shaped "
    "text and retrieved content are refused. Use recall before answering from memory: "
    "it returns what is still believed (kept) and what was withheld and why. When a task is done, file_lesson "
    "leaves what it taught for the next task; lessons_for_task (or deliver with lesson_tags) returns them."
)
TOOLS = ("remember", "recall", "deliver", "get", "list", "erase", "supersede", "list_quarantined",
         "release_quarantined", "reject_quarantined", *LESSON_TOOLS)
#: The erasure reason `erase` records when the caller gives none.
ERASE_REASON = "erased on request through the MCP erase tool"


def _d(text: str) -> Any:
    """A parameter's description, as the tool's input schema shows it to the model."""
    return Field(description=text)


# The parameters several tools share, each with its description.
Content = Annotated[str, _d("the memory's text: a fact stated plainly, not an instruction")]
Origin = Annotated[OriginName, _d("where it came from: user_asserted (the user said it), operator, model_inferred "
                                  "(you concluded it), tool_output (needs citation), injected_context (needs "
                                  "injection_source); retrieved_content and unproven are never kept")]
Source = Annotated[str | None, _d("who or what it came from (a user id, a tool name)")]
Citation = Annotated[str | None, _d("where to check it: a URL or document reference (required for tool_output)")]
MemoryId = Annotated[str, _d("a memory's id")]
NewId = Annotated[str | None, _d("the id to give the new memory (default: a generated one)")]
Limit = Annotated[int, _d("the most memories in one page")]
After = Annotated[str | None, _d("the next_after of the previous page, for the next one")]


class _Verifier(SDKTokenVerifier):
    """The service's tokens, as the SDK's bearer-auth middleware asks for them."""

    def __init__(self, tokens: TokenVerifier):
        self.tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            claims = self.tokens.claims(token)
            ctx = context_from_claims(claims)
        except Unauthenticated as exc:
            log.info("MCP request refused: %s", exc.code)
            return None
        return AccessToken(token=token, client_id=ctx.actor or "", scopes=[], expires_at=int(claims["exp"]),
                           subject=ctx.actor, claims=claims)


def identity_from_request(tool_ctx: ToolContext) -> Context:
    """The verified token of the HTTP request that carried this tool call."""
    request = tool_ctx.request_context.request
    user = getattr(request, "scope", {}).get("user") if request is not None else None
    if not isinstance(user, AuthenticatedUser) or not user.access_token.claims:
        raise ToolError("token_missing: this endpoint needs Authorization: Bearer <token>")
    return context_from_claims(user.access_token.claims)


def fixed_identity(ctx: Context) -> Identity:
    """One context for every call (stdio: the process's own context options and environment)."""
    return lambda _tool_ctx: ctx


class _Server(MCPServer):
    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        claimed = sorted(REFUSED_ARGS.intersection(arguments or {}))
        if claimed:
            raise ToolError(f"identity_in_body: {', '.join(claimed)} may not be given to a tool; "
                            "identity comes from the verified token (or the server's own context) only")
        return await super().call_tool(name, arguments, context)


def _without_vectors(record: Any) -> Any:
    if not isinstance(record, dict):
        return record
    return {k: v for k, v in record.items() if k not in VECTOR_KEYS}


def _admitted(out: dict[str, Any]) -> dict[str, Any]:
    return {"id": out["id"], "origin": out["origin"], "confidence": out["confidence"],
            "policy_fingerprint": out["policy_fingerprint"]}


def build_mcp_server(service: Callable[[], Service], identity: Identity, *,
                     tokens: TokenVerifier | None = None) -> MCPServer:
    """The MCP server. `service()` gives the open Service at call time; `identity(tool_ctx)` the
    Context of a call. With `tokens`, streamable HTTP requests need a valid bearer token."""
    # The SDK logs whole protocol messages at DEBUG, and tool arguments are memory content: its
    # loggers never go below INFO, whatever the root logger is set to.
    sdk_log = logging.getLogger("mcp")
    if sdk_log.level == logging.NOTSET or sdk_log.level < logging.INFO:
        sdk_log.setLevel(logging.INFO)
    auth = None
    if tokens is not None:
        issuer = tokens.issuer if tokens.issuer and tokens.issuer.startswith(("http://", "https://")) else None
        auth = AuthSettings(issuer_url=AnyHttpUrl(issuer or "http://127.0.0.1/"), resource_server_url=None,
                            validate_token_resource=False)
    server = _Server("pymem", instructions=INSTRUCTIONS, version=version(), auth=auth,
                     token_verifier=_Verifier(tokens) if tokens is not None else None)

    def run(tool_ctx: ToolContext, verb: str, args: dict[str, Any], passing: tuple[type[Exception], ...] = ()) -> Any:
        """One verb in the call's context; typed errors become tool errors, except those in `passing`."""
        ctx = identity(tool_ctx)
        try:
            return service().call(ctx, verb, {k: v for k, v in args.items() if v is not None})
        except passing:
            raise
        except MemoryAdmissionError as exc:
            sig = f" [signature {exc.signature}]" if exc.signature else ""  # the reason carries the score
            audit = f"; audit seq {exc.audit_seq}" if exc.audit_seq is not None else ""
            raise ToolError(f"refused by the write gate: {exc.reason}{sig}{audit}") from None
        except PymemError as exc:
            code = code_for(exc)
            if code != "internal_error":
                after = retry_after(exc)
                hint = f" (retry after {after} s)" if after is not None else ""
                raise ToolError(bounded_message(f"{code}: {exc}{hint}")) from None
            failure: BaseException = exc
        except Exception as exc:  # noqa: BLE001 - logged by type and frames only, below
            failure = exc
        rid = uuid.uuid4().hex
        log_unexpected(log, failure, rid, f"the MCP tool for {verb}")
        raise ToolError(f"internal_error: the service log has the details under id {rid}")

    def remember_record(content: str, origin: str, source: str | None, citation: str | None,
                        session_id: str | None, run_id: str | None, turn: int | None, injection_source: str | None,
                        tags: list[str] | None, kind: str | None, confidence: float | None,
                        id: str | None, ttl: float | None = None, subject: str | None = None) -> dict[str, Any]:
        record = {k: v for k, v in (("content", content), ("tags", tags), ("kind", kind), ("confidence", confidence),
                                    ("id", id)) if v is not None}
        provenance = {k: v for k, v in (("origin", origin), ("source", source), ("citation", citation),
                                        ("session_id", session_id), ("run_id", run_id), ("turn", turn),
                                        ("injection_source", injection_source)) if v is not None}
        retention = {k: v for k, v in (("ttl", ttl), ("subject", subject)) if v is not None}
        return {"record": record, "provenance": provenance, **retention}

    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    deletes = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

    @server.tool(name="remember", annotations=writes)
    def remember(content: Content, origin: Origin, ctx: ToolContext, source: Source = None,
                 citation: Citation = None,
                 session_id: Annotated[str | None, _d("the conversation it was said in")] = None,
                 run_id: Annotated[str | None, _d("the run (a multi-agent job) it belongs to")] = None,
                 turn: Annotated[int | None, _d("the turn of the conversation it was said at")] = None,
                 injection_source: Annotated[str | None, _d("what injected it into the context (required for "
                                                            "injected_context)")] = None,
                 tags: Annotated[list[str] | None, _d("labels to find it by")] = None,
                 kind: Annotated[str | None, _d("what sort of memory: a lowercase word (default fact)")] = None,
                 confidence: Annotated[float | None, _d("how sure, 0 to 1 (capped by the origin's trust)")] = None,
                 id: NewId = None,
                 ttl: Annotated[float | None, _d("seconds until it expires (default: the tenant's retention)")] = None,
                 subject: Annotated[str | None, _d("the id of the person it is about")] = None) -> dict[str, Any]:
        """Keep a memory if its origin says it may be kept; a refusal names the reason.

        origin: user_asserted (the user said it), operator, model_inferred (you concluded it; believed
        at most 0.6), tool_output (needs a citation), injected_context (needs injection_source);
        retrieved_content and unproven are never kept. Instruction-shaped text is refused. The result's
        decision is admitted, or quarantined: held for an operator's review, not recalled until released.
        """
        args = remember_record(content, origin, source, citation, session_id, run_id, turn, injection_source,
                               tags, kind, confidence, id, ttl, subject)
        decision: dict[str, Any] = run(ctx, "remember", args)
        return decision

    @server.tool(name="list_quarantined", annotations=reads)
    def list_quarantined(ctx: ToolContext,
                         status: Annotated[Literal["held", "released", "rejected", "all"],
                                           _d("which notes: held (default), released, rejected or all")] = "held",
                         limit: Annotated[int, _d("the most notes to return")] = 100) -> dict[str, Any]:
        """The notes the write gate held for review (oldest first), with the reason, score and content.
        No other tool returns them."""
        return {"notes": run(ctx, "list_quarantined", {"status": status, "limit": limit})}

    @server.tool(name="release_quarantined", annotations=writes)
    def release_quarantined(id: Annotated[str, _d("the held note's id")],
                            reason: Annotated[str, _d("why it may be believed (recorded)")],
                            ctx: ToolContext) -> dict[str, Any]:
        """Release a held note into memory (an operator's decision: refused to an agent's token)."""
        decided: dict[str, Any] = run(ctx, "release_quarantined", {"id": id, "reason": reason})
        return decided

    @server.tool(name="reject_quarantined", annotations=writes)
    def reject_quarantined(id: Annotated[str, _d("the held note's id")],
                           reason: Annotated[str, _d("why it is rejected (recorded)")],
                           ctx: ToolContext) -> dict[str, Any]:
        """Reject a held note: its content is dropped (an operator's decision: refused to an agent's token)."""
        decided: dict[str, Any] = run(ctx, "reject_quarantined", {"id": id, "reason": reason})
        return decided

    @server.tool(name="recall", annotations=reads)
    def recall(query: Annotated[str, _d("what to remember about, as a question or keywords")], ctx: ToolContext,
               top_k: Annotated[int, _d("the most memories to return")] = 5,
               scope_filter: Annotated[dict[str, str] | None, _d("only memories in this scope (axis: value)")] = None,
               ) -> dict[str, Any]:
        """The memories closest to the query that are still believed now (kept, with origin and
        confidence), and the ones withheld, with the reason (never their content)."""
        found: dict[str, Any] = run(ctx, "recall", {"query": query, "top_k": top_k, "scope_filter": scope_filter})
        return found

    @server.tool(name="get", annotations=reads)
    def get(id: MemoryId, ctx: ToolContext) -> dict[str, Any]:
        """One memory by id, with its revision; memory is null when there is none you may see."""
        return {"memory": _without_vectors(run(ctx, "get", {"id": id}))}

    @server.tool(name="list", annotations=reads)
    def list_(ctx: ToolContext, limit: Limit = 20, after: After = None) -> dict[str, Any]:
        """A page of memories in id order; pass next_after as `after` for the next page."""
        page = run(ctx, "list", {"limit": limit, "after": after})
        return {"memories": [_without_vectors(r) for r in page["chunks"]], "next_after": page["next_after"]}

    @server.tool(name="erase", annotations=deletes)
    def erase(ids: Annotated[list[str], _d("the ids of the memories to erase")], ctx: ToolContext,
              reason: Annotated[str, _d("why, kept in the ledger with each erased memory's hash")] = ERASE_REASON,
              ) -> dict[str, Any]:
        """Erase memories by id: their content is gone for good, the ledger keeps their hash and the reason."""
        erased, not_found = [], []
        for memory_id in ids:
            try:
                erased.append(run(ctx, "erase", {"id": memory_id, "reason": reason}, (NotFound,))["id"])
            except NotFound:
                not_found.append(memory_id)
        return {"erased": erased, "not_found": not_found}

    @server.tool(name="supersede", annotations=writes)
    def supersede(old_id: Annotated[str, _d("the id of the memory that is no longer true")], content: Content,
                  origin: Origin, ctx: ToolContext, source: Source = None, citation: Citation = None,
                  id: NewId = None) -> dict[str, Any]:
        """Replace a memory that is no longer true: the new one is judged like remember, the old one
        stops being believed (it stays in the record of what was believed when)."""
        args = remember_record(content, origin, source, citation, None, None, None, None, None, None, None, id)
        return _admitted(run(ctx, "supersede", {"old_id": old_id, **args}))

    @server.tool(name="deliver", annotations=writes)
    def deliver(session_id: Annotated[str, _d("your conversation's id (the session starts on first use)")],
                ctx: ToolContext,
                query: Annotated[str | None, _d("this turn's message, to pick the relevant memories")] = None,
                turn: Annotated[int | None, _d("this turn's number in the conversation")] = None,
                budget: Annotated[int | None, _d("the most tokens the block may take")] = None,
                surface: Annotated[SurfaceName, _d("where the conversation happens, for a new session")] = "chat",
                lesson_tags: Annotated[list[str] | None, _d("your task's tags, to add the lessons left for it")] = None,
                role: Annotated[str | None, _d("your role in the task (some roles receive no lessons)")] = None,
                ) -> dict[str, Any]:
        """The memory block for this turn of a conversation (session_id: your conversation's id), within
        a token budget: what is believed and relevant, each item attributed. With lesson_tags (your
        task's tags) and your role, the lessons earlier tasks left for it too. Starts the session on
        first use (on `surface`); each delivery is recorded, the lessons named."""
        args = {"session_id": session_id, "query": query, "turn": turn, "budget": budget, "lesson_tags": lesson_tags,
                "role": role}
        block: dict[str, Any]
        try:
            block = run(ctx, "deliver", args, (UnknownSession,))
        except UnknownSession:
            run(ctx, "start_session", {"session_id": session_id, "surface": surface, "first_message": query})
            block = run(ctx, "deliver", args)
        return block

    register_lesson_tools(server, run, reads, writes)
    return server

