"""The OpenAPI document of the service, built from the verb table and the wire's error table.

The app serves it at GET /openapi.json; docs/openapi.json is the same document checked in (a test
keeps them equal). Regenerate with: python -m pymem.server.openapi > docs/openapi.json
"""

from __future__ import annotations

import json
from typing import Any

from ..service import schemas as s
from ..service.verbs import VERBS, Verb, version
from ..service.wire import ERRORS, PROTOCOL, TOKEN_CODES

__all__ = ["openapi_document"]

JSON = "application/json"

DESCRIPTION = f"""pymem's memory service ({PROTOCOL}).

Every /v1 call carries its own signed token (`Authorization: Bearer <JWT>`, HS256 with the
service's key, or RS256/EdDSA with its issuer's public key). The token's verified claims (`tenant`,
`actor`, optional `adapter`, `scope`, `read_adapters`) are the context of that call's transaction,
which Postgres enforces with row-level security; a body that names any of them is refused
(`identity_in_body`).

`POST /v1/call` takes an envelope `{{"verb", "args", "idempotency_key"?}}` and answers
`{{"ok": true, "result"}}` or `{{"ok": false, "error": {{"code", "message", "request_id", "details"?}}}}`.

The MCP endpoint at `/mcp` (streamable HTTP, same tokens) speaks the Model Context Protocol and is
not described here.

Error codes (status, meaning):

""" + "\n".join(f"- `{e.code}` ({e.status}): {e.meaning}" for e in ERRORS) + "\n"


def _call_schema(verb: Verb) -> s.Schema:
    args: s.Schema = {"type": "object", "properties": dict(verb.args), "additionalProperties": False}
    if verb.required:
        args["required"] = list(verb.required)
    # args may be null (or left out) exactly when nothing is required: the service reads it as {}
    properties: s.Schema = {"verb": {"const": verb.name}, "args": args if verb.required else s.nullable(args)}
    required = ["verb", "args"] if verb.required else ["verb"]
    if verb.keyed:
        properties["idempotency_key"] = s.IDEMPOTENCY_KEY
        required.append("idempotency_key")
    return {"title": verb.name, "description": verb.summary, "type": "object", "properties": properties,
            "required": required, "additionalProperties": False}


def _error_response(description: str, codes: list[str]) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": {"$ref": "#/components/schemas/Error"}}},
            "x-codes": codes}


def _errors(*statuses: int) -> dict[str, Any]:
    out = {}
    for status in statuses:
        codes = [e.code for e in ERRORS if e.status == status]
        meaning = "; ".join(f"{e.code}: {e.meaning}" for e in ERRORS if e.status == status)
        out[str(status)] = _error_response(meaning, codes)
    return out


def _ok(result: s.Schema, description: str) -> dict[str, Any]:
    schema = {"type": "object", "required": ["ok", "result"], "additionalProperties": False,
              "properties": {"ok": {"const": True}, "result": result}}
    return {"description": description, "content": {JSON: {"schema": schema}}}


def openapi_document() -> dict[str, Any]:
    verbs = [VERBS[name] for name in VERBS]
    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    status_doc = {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "pymem memory service", "version": version(), "description": DESCRIPTION},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
            "schemas": {
                "Call": {"oneOf": [{"$ref": f"#/components/schemas/Call_{v.name}"} for v in verbs]},
                **{f"Call_{v.name}": _call_schema(v) for v in verbs},
                **{f"Result_{v.name}": v.result for v in verbs},
                "Handshake": {"type": "object", "properties": {"protocols": s.STRINGS}, "additionalProperties": False},
                "HandshakeResult": {"type": "object", "required": ["protocol", "server", "verbs", "store", "identity"],
                                    "properties": {"protocol": {"const": PROTOCOL}, "server": s.OBJECT,
                                                   "verbs": s.STRINGS,
                                                   "store": s.CAPABILITIES, "identity": s.OBJECT}},
                "Error": {"type": "object", "required": ["ok", "error"], "additionalProperties": False, "properties": {
                    "ok": {"const": False},
                    "error": {"type": "object", "required": ["code", "message", "request_id"], "properties": {
                        "code": {"enum": [e.code for e in ERRORS]}, "message": {"type": "string"},
                        "request_id": {"type": "string"}, "details": s.OBJECT}}}},
            },
        },
        "paths": {
            "/v1/handshake": {"post": {
                "summary": "Negotiate the protocol; describe the store and the caller's identity",
                "operationId": "handshake", "security": secured,
                "requestBody": {"required": False,
                                "content": {JSON: {"schema": {"$ref": "#/components/schemas/Handshake"}}}},
                "responses": {"200": _ok({"$ref": "#/components/schemas/HandshakeResult"}, "what this service speaks"),
                              **_errors(400, 401, 413, 415, 500, 503)},
            }},
            "/v1/call": {"post": {
                "summary": "Run one verb: " + ", ".join(v.name for v in verbs),
                "operationId": "call", "security": secured,
                "requestBody": {"required": True, "content": {JSON: {"schema": {"$ref": "#/components/schemas/Call"}}}},
                "responses": {"200": _ok({"anyOf": [{"$ref": f"#/components/schemas/Result_{v.name}"} for v in verbs]},
                                         "the verb's result (its Result_<verb> schema)"),
                              **_errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503)},
            }},
            "/healthz": {"get": {"summary": "Liveness: the process answers", "operationId": "healthz", "security": [],
                                 "responses": {"200": {"description": "alive",
                                                       "content": {JSON: {"schema": status_doc}}}}}},
            "/readyz": {"get": {"summary": "Readiness: database reachable, pgvector usable, schema current",
                                "operationId": "readyz", "security": [],
                                "responses": {"200": {"description": "ready",
                                                      "content": {JSON: {"schema": status_doc}}},
                                              "503": {"description": "not ready",
                                                      "content": {JSON: {"schema": status_doc}}}}}},
            "/openapi.json": {"get": {"summary": "This document", "operationId": "openapi", "security": [],
                                      "responses": {"200": {"description": "the OpenAPI document",
                                                            "content": {JSON: {"schema": s.OBJECT}}}}}},
        },
        "x-token-codes": dict(TOKEN_CODES),
    }


if __name__ == "__main__":  # pragma: no cover - regenerates docs/openapi.json
    print(json.dumps(openapi_document(), indent=2, ensure_ascii=False))
