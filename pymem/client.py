"""A thin client for pymem's HTTP service: the library's verbs, over the wire.

    from pymem.client import Client
    with Client("http://127.0.0.1:8080", token) as mem:
        mem.upsert_many([...], idempotency_key="batch-1")
        mem.recall("invoice currency", top_k=3)

Each method sends one /v1/call and returns the verb's JSON result, or raises the typed error its
code stands for (pymem.service.wire): InvalidArguments, Unauthenticated, AccessDenied,
IdempotencyConflict, RevisionMismatch, MemoryAdmissionError (with reason, signature, audit_seq, score),
ConventionConflict (with both receipt ids), ... so code written against the library runs against
the service. Standard library only; one keep-alive connection per client, so use one client per
thread.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from .errors import (
    Busy,
    ConventionConflict,
    InvalidArguments,
    MemoryAdmissionError,
    PymemError,
    ServerError,
    Unauthenticated,
)
from .service.wire import BY_CODE, PROTOCOL

__all__ = ["Client", "ServiceError"]

# uvicorn closes an idle keep-alive connection after 5 s: reconnect before reusing one idle longer.
_IDLE_RECONNECT = 2.0


class ServiceError(PymemError):
    """An error response whose code this client does not know, or a response that is not the protocol's."""


class Client:
    def __init__(self, url: str, token: str, *, timeout: float = 60.0):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidArguments("the service URL must be http(s)://host[:port]")
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, parts.port
        self.prefix = parts.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._last = 0.0

    # -- plumbing ------------------------------------------------------------------------------

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is not None and time.monotonic() - self._last > _IDLE_RECONNECT:
            self.close()
        if self._conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self.host, self.port, timeout=self.timeout)
        return self._conn

    def post(self, path: str, body: Any) -> Any:
        """POST a JSON body; the `result` of an ok envelope, else the error's typed exception."""
        payload = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        conn = self._connection()
        try:
            conn.request("POST", self.prefix + path, body=payload, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise ServerError(f"cannot reach the service at {self.host}: {type(exc).__name__}") from exc
        self._last = time.monotonic()
        if response.getheader("connection", "").lower() == "close":
            self.close()
        try:
            envelope = json.loads(data)
        except ValueError:
            raise ServiceError(f"the service answered {response.status} without a JSON envelope") from None
        if isinstance(envelope, dict) and envelope.get("ok") is True and "result" in envelope:
            return envelope["result"]
        raise _error(response.status, envelope, response.getheader("retry-after"))

    def call(self, verb: str, args: Mapping[str, Any] | None = None, *, idempotency_key: str | None = None) -> Any:
        body: dict[str, Any] = {"verb": verb, "args": dict(args or {})}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        return self.post("/v1/call", body)

    def handshake(self) -> dict[str, Any]:
        return self.post("/v1/handshake", {"protocols": [PROTOCOL]})

    # -- the verbs -----------------------------------------------------------------------------

    def upsert_many(self, records: Sequence[Mapping[str, Any]], *, idempotency_key: str,
                    expected_revisions: Mapping[str, int] | None = None,
                    idempotency_class: str | None = None) -> dict[str, Any]:
        args: dict[str, Any] = {"records": list(records)}
        if expected_revisions is not None:
            args["expected_revisions"] = dict(expected_revisions)
        if idempotency_class is not None:
            args["idempotency_class"] = idempotency_class
        return self.call("upsert_many", args, idempotency_key=idempotency_key)

    def search(self, vector: Sequence[float], *, top_k: int, scope_filter: Mapping[str, str] | None = None,
               metadata_filter: Mapping[str, Any] | None = None,
               include: Mapping[str, bool] | None = None) -> list[dict[str, Any]]:
        args = {"vector": list(vector), "top_k": top_k, "scope_filter": scope_filter,
                "metadata_filter": metadata_filter, "include": include}
        return self.call("search", {k: v for k, v in args.items() if v is not None})

    def get(self, memory_id: str) -> dict[str, Any] | None:
        return self.call("get", {"id": memory_id})

    def get_many(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        return self.call("get_many", {"ids": list(ids)})

    def delete_many(self, ids: Sequence[str]) -> dict[str, int]:
        return self.call("delete_many", {"ids": list(ids)})

    def list_chunks(self, *, limit: int = 50, after: str | None = None) -> dict[str, Any]:
        return self.call("list", {"limit": limit, "after": after})

    def describe_store(self) -> dict[str, Any]:
        return self.call("describe_store")

    def health(self) -> dict[str, Any]:
        return self.call("health")

    def remember(self, record: Mapping[str, Any] | str, provenance: Mapping[str, Any]) -> dict[str, Any]:
        """The write gate's decision ({"decision": "admitted" | "quarantined", "reason", "score", "id",
        ...}); a refusal raises MemoryAdmissionError, as admit() does."""
        return self.call("remember", {"record": record if isinstance(record, str) else dict(record),
                                      "provenance": dict(provenance)})

    def list_quarantined(self, *, status: str = "held", limit: int = 100) -> list[dict[str, Any]]:
        """The notes the write gate held (QuarantinedNote.to_json()); status held, released, rejected or all."""
        return self.call("list_quarantined", {"status": status, "limit": limit})

    def release_quarantined(self, note_id: str, reason: str) -> int:
        """An operator's release of a held note; the ledger seq of quarantine.released."""
        return self.call("release_quarantined", {"id": note_id, "reason": reason})["seq"]

    def reject_quarantined(self, note_id: str, reason: str) -> int:
        """An operator's rejection of a held note; the ledger seq of quarantine.rejected."""
        return self.call("reject_quarantined", {"id": note_id, "reason": reason})["seq"]

    def recall(self, query: str | Sequence[float], *, top_k: int = 5,
               scope_filter: Mapping[str, str] | None = None) -> dict[str, Any]:
        """recall()'s result as JSON: {"kept", "withheld", "policy_fingerprint", "candidates"}."""
        args: dict[str, Any] = {"query": query if isinstance(query, str) else list(query), "top_k": top_k}
        if scope_filter is not None:
            args["scope_filter"] = dict(scope_filter)
        return self.call("recall", args)

    # -- delivery ------------------------------------------------------------------------------

    def start_session(self, session_id: str, surface: str, *, incognito: bool = False,
                      first_message: str | None = None) -> dict[str, Any]:
        return self.call("start_session", {"session_id": session_id, "surface": surface, "incognito": incognito,
                                           "first_message": first_message})

    def end_session(self, session_id: str, *, summary: str | None = None) -> dict[str, Any]:
        return self.call("end_session", {"session_id": session_id, "summary": summary})

    def deliver(self, session_id: str, query: str | None, *, turn: int | None = None, budget: int | None = None,
                top_k: int | None = None, lesson_tags: Sequence[str] | None = None,
                role: str | None = None) -> dict[str, Any]:
        """Delivery.to_json(): the block (exactly what the agent receives), its items, its injection seq;
        with `lesson_tags` (and `role`), the lessons for the task too (deliver_with_lessons)."""
        return self.call("deliver", {"query": query, **_given(session_id=session_id, turn=turn, budget=budget,
                                                              top_k=top_k, lesson_tags=_listed(lesson_tags),
                                                              role=role)})

    def supersede(self, old_id: str, record: Mapping[str, Any] | str, provenance: Mapping[str, Any]) -> dict[str, Any]:
        return self.call("supersede", {"old_id": old_id, "record": record if isinstance(record, str) else dict(record),
                                       "provenance": dict(provenance)})

    def erase(self, memory_id: str, reason: str) -> int:
        """The ledger seq of the erasure's event, as erase() returns it."""
        return self.call("erase", {"id": memory_id, "reason": reason})["seq"]

    # -- lessons, convention receipts, shared facts (results as the library's to_json()) ----------

    def file_lesson(self, content: str, tags: Sequence[str], memory_type: str, confidence: float | None = None,
                    source_task: str | None = None, *, origin: str | None = None) -> dict[str, Any]:
        """FiledLesson.to_json(); a refusal raises MemoryAdmissionError, as file_lesson() does."""
        return self.call("file_lesson", _given(content=content, tags=_listed(tags), memory_type=memory_type,
                                               confidence=confidence, source_task=source_task, origin=origin))

    def list_lessons(self, *, memory_type: str | None = None, tag: str | None = None,
                     limit: int | None = None) -> list[dict[str, Any]]:
        return self.call("list_lessons", _given(memory_type=memory_type, tag=tag, limit=limit))

    def lessons_for_task(self, tags: Sequence[str], *, role: str | None = None, limit: int | None = None,
                         budget: int | None = None) -> dict[str, Any]:
        """LessonsForTask.to_json(): the rendered `block` and its `lessons`."""
        return self.call("lessons_for_task", _given(tags=_listed(tags), role=role, limit=limit, budget=budget))

    def file_review_correction(self, rule_text: str, subject: str, base_commit: str, assertion: str,
                               subject_symbol: str | None = None, *, tags: Sequence[str] | None = None,
                               confidence: float | None = None, source_task: str | None = None,
                               origin: str | None = None) -> dict[str, Any]:
        """FiledCorrection.to_json(); a contradiction raises ConventionConflict naming both receipts."""
        return self.call("file_review_correction", _given(
            rule_text=rule_text, subject=subject, base_commit=base_commit, assertion=assertion,
            subject_symbol=subject_symbol, tags=_listed(tags), confidence=confidence, source_task=source_task,
            origin=origin))

    def active_conventions(self) -> dict[str, Any]:
        """{"ruleset_hash", "rules"}: the rules in force."""
        return self.call("active_conventions")

    def retire_convention(self, receipt_id: str, reason: str | None = None) -> dict[str, Any]:
        return self.call("retire_convention", _given(receipt_id=receipt_id, reason=reason))

    def publish_fact(self, tag: str, key: str, value: str, reach: str = "run", *, run_id: str | None = None,
                     producer_task: str | None = None) -> dict[str, Any]:
        """publish(): `reach` is the library's `scope` ("run" or "tenant")."""
        return self.call("publish_fact", _given(tag=tag, key=key, value=value, reach=reach, run_id=run_id,
                                                producer_task=producer_task))

    def subscribe_facts(self, tag: str, reach: str = "run", *, run_id: str | None = None,
                        read_only_from_adapters: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """subscribe(): the facts so far, oldest first (the live follow mode is not a call)."""
        return self.call("subscribe_facts", _given(tag=tag, reach=reach, run_id=run_id,
                                                   read_only_from_adapters=_listed(read_only_from_adapters)))


def _given(**args: Any) -> dict[str, Any]:
    """The arguments that were given: None leaves the service's default."""
    return {k: v for k, v in args.items() if v is not None}


def _listed(values: Sequence[str] | None) -> list[str] | None:
    return None if values is None else list(values)


def _seconds(value: Any) -> float | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 and seconds == seconds and seconds != float("inf") else None


def _error(status: int, envelope: Any, retry_after: str | None = None) -> PymemError:
    error = envelope.get("error") if isinstance(envelope, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return ServiceError(f"the service answered {status} without an error envelope")
    code, message = error["code"], str(error.get("message", ""))
    known = BY_CODE.get(code)
    if known is None:
        return ServiceError(f"{code}: {message}")
    if issubclass(known.raises, MemoryAdmissionError):  # the write gate's refusals, sessions' included
        details = error.get("details") or {}
        return known.raises(details.get("reason", message), signature=details.get("signature"),
                            audit_seq=details.get("audit_seq"), score=details.get("score"))
    if known.raises is Unauthenticated:
        return Unauthenticated(code, message)
    if known.raises is ConventionConflict:
        details = error.get("details") or {}
        return ConventionConflict(message, receipt_id=str(details.get("receipt_id", "")),
                                  conflicting_id=str(details.get("conflicting_id", "")))
    if issubclass(known.raises, Busy):  # retryable: the hint from Retry-After (or the details)
        details = error.get("details") or {}
        hint = _seconds(retry_after) if retry_after is not None else _seconds(details.get("retry_after"))
        exc: PymemError = known.raises(message, retry_after=hint)
    else:
        exc = known.raises(message)
    exc.code = code  # type: ignore[attr-defined]  # the wire code, for callers that branch on it
    return exc
