"""The wire's vocabulary: every typed error has a code and a documented status, the envelope refuses
identity, the verb table is the only argument list, and the checked-in OpenAPI document is current."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from pymem import errors
from pymem.server.openapi import openapi_document
from pymem.server.requests import parse_envelope, parse_json
from pymem.service.verbs import REFUSED_ARGS, VERBS, check_args
from pymem.service.wire import BY_CODE, ERRORS, ProtocolError, code_for, status_for

ROOT = Path(__file__).resolve().parents[2]


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_typed_error_has_its_own_code_and_a_documented_status():
    typed = [c for c in _subclasses(errors.PymemError) if c.__module__ == "pymem.errors"]
    assert typed, "no typed errors found"
    seen = {}
    for cls in typed:
        if cls is errors.Unauthenticated:
            exc = cls("token_expired", "message")
        elif cls is errors.ConventionConflict:
            exc = cls("message", receipt_id="cv-1", conflicting_id="cv-2")
        else:
            exc = cls("message")
        code = code_for(exc)
        assert code != "internal_error", f"{cls.__name__} has no wire code: add it to pymem.service.wire"
        assert code in BY_CODE and BY_CODE[code].status < 600
        seen[cls] = code
    # a subclass never falls back to its parent's code
    assert seen[errors.ContextError] == "context_refused" != seen[errors.InvalidArguments]


def test_codes_are_unique_and_each_maps_back_to_an_exception_class():
    codes = [e.code for e in ERRORS]
    assert len(codes) == len(set(codes))
    for e in ERRORS:
        assert issubclass(e.raises, errors.PymemError)
        assert 400 <= e.status < 600 and status_for(e.code) == e.status
    assert code_for(RuntimeError("anything")) == "internal_error" and status_for("internal_error") == 500
    assert code_for(ProtocolError("no_such_code", "x")) == "internal_error"


def test_the_readme_lists_every_error_code():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [e.code for e in ERRORS if f"`{e.code}`" not in readme]
    assert not missing, f"README.md does not list: {missing}"


@pytest.mark.parametrize("body,code", [
    ([], "malformed_request"),
    ("call", "malformed_request"),
    ({"args": {}}, "malformed_request"),
    ({"verb": 3}, "malformed_request"),
    ({"verb": "get", "extra": 1}, "malformed_request"),
    ({"verb": "get", "idempotency_key": 5}, "malformed_request"),
    ({"verb": "get", "tenant": "other"}, "identity_in_body"),
    ({"verb": "get", "actor": "other"}, "identity_in_body"),
    ({"verb": "get", "scope": {}}, "identity_in_body"),
])
def test_the_envelope_is_strict_and_refuses_identity(body, code):
    with pytest.raises(ProtocolError) as info:
        parse_envelope(body)
    assert info.value.code == code


@pytest.mark.parametrize("name", sorted(REFUSED_ARGS))
def test_identity_is_refused_in_every_verbs_arguments(name):
    for verb in VERBS.values():
        with pytest.raises(ProtocolError) as info:
            check_args(verb, {name: "x"})
        assert info.value.code == "identity_in_body"


def test_unknown_and_missing_arguments_are_invalid():
    with pytest.raises(errors.InvalidArguments, match="unknown argument"):
        check_args(VERBS["get"], {"id": "a", "memory_id": "a"})
    with pytest.raises(errors.InvalidArguments, match="needs id"):
        check_args(VERBS["get"], {})
    with pytest.raises(errors.InvalidArguments, match="must be an object"):
        check_args(VERBS["get"], ["a"])


def test_every_verb_argument_is_a_parameter_of_what_it_calls():
    """The schema's argument names are what the library takes (no schema that cannot be called)."""
    from pymem import (
        active_conventions,
        admit,
        deliver,
        deliver_with_lessons,
        end_session,
        file_lesson,
        file_review_correction,
        lessons_for_task,
        list_lessons,
        publish,
        recall,
        retire_convention,
        start_session,
        subscribe,
    )
    from pymem.storage.memories import Memories

    targets = {"upsert_many": [Memories.upsert_many], "search": [Memories.search], "list": [Memories.list_chunks],
               "remember": [admit], "recall": [recall], "start_session": [start_session],
               "end_session": [end_session], "deliver": [deliver_with_lessons, deliver], "file_lesson": [file_lesson],
               "list_lessons": [list_lessons], "lessons_for_task": [lessons_for_task],
               "file_review_correction": [file_review_correction], "active_conventions": [active_conventions],
               "retire_convention": [retire_convention], "publish_fact": [publish], "subscribe_facts": [subscribe]}
    renamed = {"reach": "scope"}  # a fact's reach: `scope` on the wire would name the token's scope
    for name, fns in targets.items():
        params = set().union(*(inspect.signature(fn).parameters for fn in fns))
        assert {renamed.get(a, a) for a in VERBS[name].args} <= params, name


def test_no_verb_offers_an_argument_the_envelope_refuses():
    for verb in VERBS.values():
        assert REFUSED_ARGS.isdisjoint(verb.args), verb.name


def test_a_read_filter_that_only_narrows_is_not_identity():
    args = {"tag": "schema", "run_id": "r-1", "read_only_from_adapters": ["agent-a"]}
    assert check_args(VERBS["subscribe_facts"], args) == args
    for claimed in ({**args, "read_adapters": ["agent-a"]}, {**args, "scope": "tenant"},
                    {**args, "source_adapter": "agent-a"}):
        with pytest.raises(ProtocolError) as info:
            check_args(VERBS["subscribe_facts"], claimed)
        assert info.value.code == "identity_in_body"


@pytest.mark.parametrize("raw", [b"{", b"\xff\xfe", b'{"a": NaN}', b'{"a": Infinity}', b'"\\ud800"', b"[" * 100000])
def test_bodies_that_are_not_plain_json_are_malformed(raw):
    with pytest.raises(ProtocolError) as info:
        parse_json(raw)
    assert info.value.code == "malformed_request"


def test_a_surrogate_pair_escape_is_fine():
    assert parse_json(b'{"text": "\\ud83d\\ude00"}') == {"text": "\U0001F600"}


def test_the_checked_in_openapi_document_is_current():
    checked_in = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))
    assert checked_in == openapi_document(), (
        "docs/openapi.json is stale: python -m pymem.server.openapi > docs/openapi.json")


def test_the_openapi_document_covers_every_verb_and_code():
    doc = openapi_document()
    schemas = doc["components"]["schemas"]
    for name in VERBS:
        assert f"Call_{name}" in schemas and f"Result_{name}" in schemas
    assert set(schemas["Error"]["properties"]["error"]["properties"]["code"]["enum"]) == set(BY_CODE)
    documented = {int(s) for s in doc["paths"]["/v1/call"]["post"]["responses"] if s != "200"}
    assert {e.status for e in ERRORS} - {405} == documented  # 405 is any route's, for a method it does not take
