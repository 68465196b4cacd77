"""No two modules of the library import each other (a two-file import circle), not even
late or for type checking only: a shared piece belongs to one of them, or below both."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("enrich", "connectors", "jobs")
# Known and left for later (each a TYPE_CHECKING or late import of the other's class):
# the Redis lookup and its columnar path share its private state;
# the stream source and its offsets came with their
# features. A new circle fails this test.
KNOWN = {
    ("connectors.redis", "connectors.redis.arrow"),
}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The library modules ``name`` imports, wherever in the file."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                child = f"{target}.{alias.name}"
                out.add(child if child in known else target)
    return {module for module in out if module in known and module != name}


def test_no_two_modules_import_each_other() -> None:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    circles = {
        tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph[b]
    }
    assert circles <= KNOWN, sorted(circles - KNOWN)
