"""Every public face's ``__all__`` is exactly what it serves, and the README and the docs
import only exported names.

What a face serves is read off its code: the names its lazy table (``_LAZY``) loads on
first use, the names it re-exports explicitly (``from .x import Name as Name``), the
public classes and functions it defines, and, for a facade module (``enrich.spi``),
every public name it binds.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="enrich.spark needs pyspark")

ROOT = Path(__file__).resolve().parents[2]
FACES = (
    "enrich",
    "enrich.spark",
    "enrich.spark.sql",
    "enrich.spi",
    "enrich.testing",
    "enrich.protect",
    "enrich.spark.sink.kafka_eos",
    "enrich.spark.sink.kafka",
    "connectors.redis",
    "connectors.http",
    "connectors.sql",
    "connectors.postgres",
    "connectors.mysql",
)
FACADES = {"enrich.spi"}  # modules whose every public name is there to be imported
IMPORTED = re.compile(r"from ((?:enrich|connectors)[\w.]*) import ([\w ,]+)")


def source_of(face: str) -> Path:
    path = ROOT / face.replace(".", "/")
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's statements, those of ``if TYPE_CHECKING:`` blocks included."""
    found: list[ast.stmt] = []
    for node in tree.body:
        found.extend(node.body if isinstance(node, ast.If) else [node])
    return found


def served(face: str) -> set[str]:
    tree = ast.parse(source_of(face).read_text())
    names: set[str] = set()
    for node in _top_level(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                bound = alias.asname or alias.name
                if alias.asname == alias.name or (face in FACADES and not bound.startswith("_")):
                    names.add(bound)
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if not node.name.startswith("_"):
                names.add(node.name)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets
        ):
            names |= set(ast.literal_eval(node.value))
        elif isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_LAZY":
            assert node.value is not None
            names |= set(ast.literal_eval(node.value))
    return names - {"TYPE_CHECKING"}


@pytest.mark.parametrize("face", FACES)
def test_all_is_exactly_what_the_face_serves(face: str) -> None:
    module = importlib.import_module(face)
    exported = list(module.__all__)
    assert len(set(exported)) == len(exported), f"{face}.__all__ repeats a name"
    assert set(exported) == served(face)
    for name in exported:
        assert getattr(module, name) is not None, f"{face}.{name} is exported but missing"


def test_the_docs_import_only_exported_names() -> None:
    faces = set(FACES)
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for face, names in IMPORTED.findall(doc.read_text()):
            if face not in faces:
                continue
            exported = set(importlib.import_module(face).__all__)
            imported = {n.strip() for n in names.split(",") if n.strip()}
            assert imported <= exported, f"{doc.name}: {face} does not export {imported - exported}"


def test_the_names_the_readme_uses_are_in_the_spark_face() -> None:
    import enrich.spark

    used = {"lookup_join", "async_map", "low_latency", "register_data_sources", "warm_up"}
    assert used | {"OperatorSettings", "stream_statistics"} <= set(enrich.spark.__all__)


@pytest.mark.parametrize(
    "old",
    [
        "enrich.lookup.arrow_types",
        "enrich.spark.arrow",
        "enrich.spark.sql_join",
        "enrich.spark.sql_pandas",
        "enrich.spark.sink.commit",
    ],
)
def test_moved_modules_have_one_path_only(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_no_import_hook_aliases_module_paths() -> None:
    assert not [finder for finder in sys.meta_path if type(finder).__module__.startswith("enrich")]
