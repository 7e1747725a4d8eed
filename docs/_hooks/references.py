"""MkDocs hooks: the reference pages written from the code at build time.

`<!-- reference:python -->` becomes one mkdocstrings entry per public name (`pymem.__all__`, then
each public subpackage's `__all__`), and `<!-- reference:http -->` the HTTP reference, from
`docs/openapi.json`. Both lists are read when the site is built, so a name or a verb added to the
code appears in the reference without anyone editing a page (tests/docs/test_references.py
checks the built site against the code).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

#: The public subpackages whose `__all__` the Python reference documents, in the order shown.
SUBPACKAGES = ("pymem.errors", "pymem.admission", "pymem.delivery", "pymem.lessons", "pymem.conventions",
               "pymem.facts", "pymem.integrity", "pymem.embedder", "pymem.vocabulary", "pymem.admin",
               "pymem.telemetry", "pymem.aio", "pymem.langgraph", "pymem.sqlalchemy", "pymem.client")

PYTHON_MARK = "<!-- reference:python -->"
HTTP_MARK = "<!-- reference:http -->"


def public_modules() -> list[tuple[str, list[str]]]:
    """(module, its public names) for pymem and each subpackage that exists and declares `__all__`;
    a subpackage whose optional dependency is missing is left out."""
    out = []
    for name in ("pymem", *SUBPACKAGES):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        names = getattr(module, "__all__", None)
        if names:
            out.append((name, list(names)))
    return out


def python_reference() -> str:
    parts = []
    core = set()
    for module, names in public_modules():
        parts.append(f"## `{module}`\n")
        for name in names:
            if module != "pymem" and name in core:
                parts.append(f"- `{module}.{name}`: the same object as [`pymem.{name}`](#pymem.{name}).\n")
                continue
            parts.append(f"::: {module}.{name}\n")
        if module == "pymem":
            core = set(names)
    return "\n".join(parts)


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " | ".join(f"`{v}`" if isinstance(v, str) else json.dumps(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array" and "items" in schema:
        return f"array of {_type(schema['items'])}"
    return kind


def args_schema(call: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The object schema of a verb's `args`, and whether `args` may be left out (null)."""
    args = call["properties"].get("args", {})
    options = args.get("anyOf", [args])
    objects = [o for o in options if o.get("type") == "object"]
    optional = "args" not in call.get("required", []) or any(o.get("type") == "null" for o in options)
    return (objects[0] if objects else {}), optional


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def http_reference(spec: dict[str, Any]) -> str:
    out = [f"OpenAPI {spec['openapi']}, *{spec['info']['title']}* {spec['info'].get('version', '')}.\n",
           "### Routes\n", "| method | path | summary | authentication |", "| --- | --- | --- | --- |"]
    for path, item in spec["paths"].items():
        for method, op in item.items():
            auth = "bearer token" if op.get("security") else "none"
            out.append(f"| `{method.upper()}` | `{path}` | {_cell(op.get('summary', ''))} | {auth} |")
    schemas = spec["components"]["schemas"]
    verbs = [name.split("_", 1)[1] for name in schemas if name.startswith("Call_")]
    out += ["", "### Verbs of `POST /v1/call`\n",
            "Each call is the envelope `{\"verb\", \"args\", \"idempotency_key\"?}`; the answer is "
            "`{\"ok\": true, \"result\": ...}` or an [error](#errors).\n"]
    for verb in verbs:
        call = schemas[f"Call_{verb}"]
        args, optional = args_schema(call)
        required = set(args.get("required", []))
        out += [f"#### `{verb}`\n", _cell(call.get("description", "")) + "\n"]
        props = args.get("properties", {})
        if props:
            out += ["| argument | type | required | meaning |", "| --- | --- | --- | --- |"]
            for name, prop in props.items():
                meaning = prop.get("description", "")
                if "default" in prop:
                    meaning = f"{meaning} (default `{json.dumps(prop['default'])}`)".strip()
                out.append(f"| `{name}` | {_cell(_type(prop))} | {'yes' if name in required else 'no'} | "
                           f"{_cell(meaning)} |")
            if optional:
                out.append("\n`args` may be left out (or null) when no argument is needed.")
        else:
            out.append("No arguments.")
        if "idempotency_key" in call.get("required", []):
            out.append("\nThe envelope's `idempotency_key` is required.")
        result = schemas.get(f"Result_{verb}")
        if result:
            fields = ", ".join(f"`{k}`" for k in result.get("properties", {}))
            out.append(f"\n**Result**: {_cell(result.get('description', _type(result)))}"
                       + (f" (fields {fields})" if fields else "") + "\n")
    error = schemas["Error"]["properties"]["error"]
    codes = error["properties"]["code"]["enum"]
    out += ["### Errors\n", "A refused call answers `{\"ok\": false, \"error\": {\"code\", \"message\", "
            "\"request_id\", \"details\"?}}` with one of these codes (the statuses and meanings are in "
            "[the service's error table](../service.md#errors-on-the-wire)):\n",
            ", ".join(f"`{c}`" for c in codes) + "\n"]
    tokens = spec.get("x-token-codes", {})
    if tokens:
        out += ["Token refusals (401):\n", "| code | meaning |", "| --- | --- |"]
        out += [f"| `{code}` | {_cell(text)} |" for code, text in tokens.items()]
    return "\n".join(out) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if PYTHON_MARK in markdown:
        markdown = markdown.replace(PYTHON_MARK, python_reference())
    if HTTP_MARK in markdown:
        spec = json.loads((Path(config["docs_dir"]) / "openapi.json").read_text(encoding="utf-8"))
        markdown = markdown.replace(HTTP_MARK, http_reference(spec))
    return markdown
