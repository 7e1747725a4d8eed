"""The Prometheus exposition pymem writes itself (pymem.telemetry.metrics), read back with the reference
parser; the JSON log formatter (pymem.telemetry.logs)."""

from __future__ import annotations

import json
import logging
import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pymem.telemetry.logs import JsonFormatter
from pymem.telemetry.metrics import FAMILIES, LATENCY_BUCKETS, Registry


def parsed(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(text: str, name: str) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_every_family_is_declared_even_before_anything_is_counted():
    text = Registry().exposition()
    families = parsed(text)
    # the parser names counters without their _total suffix
    assert {f.name.removesuffix("_total") for f in FAMILIES} == set(families)
    assert samples(text, "pymem_deliveries_total") == {}
    assert all(f.name.startswith("pymem_") for f in FAMILIES)


def test_counters_add_per_label_set_and_escape_their_values():
    r = Registry()
    r.count("pymem_admissions_total", decision="admit")
    r.count("pymem_admissions_total", decision="admit")
    r.count("pymem_admissions_total", decision="refuse")
    r.count("pymem_requests_total", route="other", verb="", status=404, code='a"b\\c\nd')
    text = r.exposition()
    assert samples(text, "pymem_admissions_total") == {(("decision", "admit"),): 2.0, (("decision", "refuse"),): 1.0}
    [(labels, value)] = samples(text, "pymem_requests_total").items()
    assert dict(labels)["code"] == 'a"b\\c\nd' and dict(labels)["status"] == "404" and value == 1.0
    assert r.value("pymem_admissions_total", decision="admit") == 2.0
    assert r.value("pymem_admissions_total", decision="quarantine") == 0.0


def test_a_histogram_is_cumulative_with_its_sum_and_count():
    r = Registry()
    for seconds in (0.0005, 0.003, 0.003, 7.0, 100.0):
        r.observe("pymem_request_duration_seconds", seconds, route="/v1/call", verb="get")
    text = r.exposition()
    buckets = {dict(k)["le"]: v for k, v in samples(text, "pymem_request_duration_seconds_bucket").items()}
    assert buckets["0.001"] == 1 and buckets["0.005"] == 3 and buckets["5.0"] == 3 and buckets["10.0"] == 4
    assert buckets["+Inf"] == 5 and len(buckets) == len(LATENCY_BUCKETS) + 1
    values = list(buckets.values())
    assert values == sorted(values)
    [total] = samples(text, "pymem_request_duration_seconds_sum").values()
    [n] = samples(text, "pymem_request_duration_seconds_count").values()
    assert math.isclose(total, 107.0065) and n == 5
    assert r.value("pymem_request_duration_seconds", route="/v1/call", verb="get") == 5


def test_gauges_given_at_scrape_time():
    text = Registry().exposition([("pymem_pool_connections", "in use or idle",
                                   [("pymem_pool_connections", {"state": "in_use"}, 3),
                                    ("pymem_pool_connections", {"state": "idle"}, 7)])])
    assert parsed(text)["pymem_pool_connections"].type == "gauge"
    assert samples(text, "pymem_pool_connections") == {(("state", "idle"),): 7.0, (("state", "in_use"),): 3.0}


def test_labels_are_the_declared_ones_only():
    r = Registry()
    with pytest.raises(ValueError, match="takes the labels decision"):
        r.count("pymem_admissions_total", decision="admit", tenant="acme")
    with pytest.raises(ValueError):
        r.count("pymem_admissions_total")
    with pytest.raises(KeyError):
        r.count("pymem_anything_total")
    assert "acme" not in r.exposition()


def test_json_log_lines_parse_and_keep_an_exceptions_type_not_its_message():
    formatter = JsonFormatter()
    record = logging.LogRecord("pymem.server.access", logging.INFO, __file__, 1, "GET %s %d", ("/healthz", 200), None)
    record.status, record.request_id, record.obj = 200, "abc", object()
    line = json.loads(formatter.format(record))
    assert line["message"] == "GET /healthz 200" and line["level"] == "info" and line["logger"] == "pymem.server.access"
    assert line["status"] == 200 and line["request_id"] == "abc" and "obj" not in line and line["time"].endswith("+00:00")
    marker = "zq-" + "marker"  # not on the raising line: a frame shows its code line
    try:
        raise ValueError(f"a caller's {marker}")
    except ValueError:
        import sys

        record = logging.LogRecord("pymem", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    text = formatter.format(record)
    assert "\n" not in text and "zq-marker" not in text
    assert json.loads(text)["error"]["type"] == "ValueError"
