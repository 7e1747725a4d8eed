"""Schema-driven fuzzing: schemathesis generates requests from the served OpenAPI document, valid and
invalid, against a real server and database. No response may be a 500, use an undocumented status
or content type, or violate its documented schema; a request that breaks the schema must be refused.

Bounded: a fixed number of examples per operation and mode, no example database, well under a minute.
"""

from __future__ import annotations

import pytest
import schemathesis
from helpers.service import KEY, request, running, token
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from pymem.server.app import build_app
from pymem.server.openapi import openapi_document
from pymem.service.auth import TokenVerifier

EXAMPLES = {GenerationMode.POSITIVE: 60, GenerationMode.NEGATIVE: 40}
CHECKS = {
    GenerationMode.POSITIVE: [not_a_server_error, status_code_conformance, content_type_conformance,
                              response_schema_conformance],
    GenerationMode.NEGATIVE: [not_a_server_error, status_code_conformance, content_type_conformance,
                              response_schema_conformance, negative_data_rejection],
}


# schemathesis's own strategies draw from the random module, which Hypothesis warns about
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
def test_schemathesis_finds_no_server_error_and_no_schema_violation(kstore):
    # kstore: file_review_correction signs with a key in the test's own directory
    with running(build_app(kstore, tokens=TokenVerifier.hs256(KEY))) as url:
        served = request(url, "GET", "/openapi.json")[2]
        assert served == openapi_document()
        schema = schemathesis.openapi.from_dict(served)
        headers = {"Authorization": f"Bearer {token(tenant='fuzz', actor='fuzzer')}"}
        ran = 0
        for result in schema.get_all_operations():
            operation = result.ok()
            modes = [GenerationMode.POSITIVE]
            if operation.method.upper() == "POST":
                modes.append(GenerationMode.NEGATIVE)
            for mode in modes:
                @settings(max_examples=EXAMPLES[mode], deadline=None, database=None, derandomize=True,
                          phases=[Phase.explicit, Phase.generate, Phase.shrink],
                          suppress_health_check=list(HealthCheck))
                @given(case=operation.as_strategy(generation_mode=mode))
                def check(case):
                    case.call_and_validate(base_url=url, headers=headers, checks=CHECKS[mode])  # noqa: B023 - run in this iteration

                check()
                ran += 1
        assert ran == 7  # 5 operations, the two POSTs in both modes
