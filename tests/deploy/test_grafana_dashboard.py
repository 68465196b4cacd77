"""deploy/grafana/spark-enrich.json is a Grafana dashboard that reads what the job exports.

Grafana itself is not installed here: the dashboard is checked against a JSON schema of
the dashboard model's fields Grafana needs to load and draw it (the fields and types of
its dashboard kind: schemaVersion, templating, annotations, panels with their grid
places, datasources and targets), and every query's metric names against a real
exposition of the exporter (a running job's scrape is compared too, in
tests/jobs/test_prometheus_scrape.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.dashboard import dashboard_queries, exposition_names, metric_names

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("prometheus_client", reason="needs the metrics extra")
pytest.importorskip("pyspark", reason="the exporter reads Spark's accumulators")

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy/grafana/spark-enrich.json"

_DATASOURCE = {
    "type": "object",
    "required": ["type", "uid"],
    "properties": {"type": {"const": "prometheus"}, "uid": {"type": "string"}},
}
_TARGET = {
    "type": "object",
    "required": ["expr", "refId"],
    "properties": {
        "expr": {"type": "string", "minLength": 1},
        "refId": {"type": "string", "pattern": "^[A-Z]$"},
        "legendFormat": {"type": "string"},
        "datasource": _DATASOURCE,
    },
}
_PANEL = {
    "type": "object",
    "required": ["id", "type", "title", "gridPos", "datasource", "targets"],
    "properties": {
        "id": {"type": "integer"},
        "type": {"enum": ["timeseries", "stat", "gauge", "bargauge", "table", "heatmap"]},
        "title": {"type": "string", "minLength": 1},
        "gridPos": {
            "type": "object",
            "required": ["h", "w", "x", "y"],
            "properties": {
                "h": {"type": "integer", "minimum": 1},
                "w": {"type": "integer", "minimum": 1, "maximum": 24},
                "x": {"type": "integer", "minimum": 0, "maximum": 23},
                "y": {"type": "integer", "minimum": 0},
            },
        },
        "datasource": _DATASOURCE,
        "targets": {"type": "array", "minItems": 1, "items": _TARGET},
        "fieldConfig": {
            "type": "object",
            "required": ["defaults", "overrides"],
            "properties": {"overrides": {"type": "array"}},
        },
    },
}
_VARIABLE = {
    "type": "object",
    "required": ["type", "name"],
    "properties": {
        "type": {
            "enum": ["query", "adhoc", "constant", "datasource", "interval", "textbox", "custom"]
        },
        "name": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"},
        "hide": {"enum": [0, 1, 2]},
        "refresh": {"enum": [0, 1, 2]},
        "sort": {"enum": list(range(9))},
    },
}
SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "templating", "annotations", "panels", "time"],
    "properties": {
        "uid": {"type": "string", "minLength": 8, "maxLength": 40},
        "title": {"type": "string", "minLength": 1},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "version": {"type": "integer"},
        "editable": {"type": "boolean"},
        "graphTooltip": {"enum": [0, 1, 2]},
        "refresh": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "time": {
            "type": "object",
            "required": ["from", "to"],
            "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
        },
        "annotations": {"type": "object", "properties": {"list": {"type": "array"}}},
        "templating": {
            "type": "object",
            "required": ["list"],
            "properties": {"list": {"type": "array", "items": _VARIABLE}},
        },
        "panels": {"type": "array", "minItems": 1, "items": _PANEL},
    },
}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def test_the_dashboard_has_the_fields_grafana_loads() -> None:
    board = dashboard()
    jsonschema.validate(board, SCHEMA)
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    places = {(p["gridPos"]["x"], p["gridPos"]["y"]) for p in board["panels"]}
    assert len(places) == len(ids)  # no two panels drawn on one place
    assert all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in board["panels"])
    variables = {v["name"] for v in board["templating"]["list"]}
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}" and "datasource" in variables


def test_the_dashboard_shows_what_the_issue_asks() -> None:
    titles = " / ".join(p["title"].lower() for p in dashboard()["panels"])
    for wanted in ("throughput", "p50 / p99", "errors by reason", "cache hit ratio"):
        assert wanted in titles
    assert "in flight vs capacity" in titles and "source lag" in titles


def test_every_query_names_metrics_the_exporter_serves() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from enrich.spark.metrics.exporter import EnrichCollector
    from enrich.spark.metrics.progress_board import ProgressBoard

    registry = CollectorRegistry(auto_describe=False)
    registry.register(EnrichCollector(ProgressBoard()))
    exported = exposition_names(generate_latest(registry).decode())
    queries = list(dashboard_queries(dashboard()))
    assert len(queries) > 10
    for expr in queries:
        names = metric_names(expr)
        assert names, expr
        assert names <= exported, (expr, names - exported)


def test_metric_names_reads_promql() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (stage, le) (rate(enrich_x_bucket{query=~"$q"}'
        "[$__rate_interval]))) / sum(enrich_y_total)"
    )
    assert metric_names(expr) == {"enrich_x_bucket", "enrich_y_total"}
