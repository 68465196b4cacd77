"""The Grafana dashboard's queries and the metric names they read, and a scrape's names."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from typing import Any

# PromQL's words that look like metric names: functions, aggregations, keywords.
_PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "rate", "irate", "increase", "by", "without",
    "histogram_quantile", "on", "ignoring", "group_left", "group_right", "and", "or",
    "unless", "label_values",
}  # fmt: skip
_NAME = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?=\{|\[|\)|$|\s)")
_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[str]:
    """Every PromQL expression of the dashboard: its panels' targets and its query
    variables."""
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            yield str(target["expr"])
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            yield re.sub(r"^label_values\((\w+),.*\)$", r"\1", text)


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads (label matchers and strings removed)."""
    bare = re.sub(r"\{[^}]*\}", " ", expr)
    bare = re.sub(r"\[[^\]]*\]", " ", bare)
    bare = re.sub(r"\bby\s*\([^)]*\)", " ", bare)
    bare = re.sub(r'"[^"]*"', " ", bare)
    return {
        name
        for name in _NAME.findall(bare)
        if name not in _PROMQL_WORDS and not name.replace(".", "").isdigit()
    }


def exposition_names(text: str) -> set[str]:
    """The sample names an exposition may hold: each family's (``# TYPE``) and its
    series' suffixed names (``_total``, ``_bucket``...)."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            family = line.split()[2]
            names.add(family)
            names.update(family + suffix for suffix in _SUFFIXES)
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names


def scrape_names(url: str) -> set[str]:
    """:func:`exposition_names` of a live ``/metrics``."""
    with urllib.request.urlopen(url, timeout=30) as answer:
        return exposition_names(answer.read().decode())
