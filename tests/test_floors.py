"""The house's floors, read from the code's imports (wherever in a file, late or for type
checking only): Spark sits at the edge, and the Redis source and sink are rooms apart."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_import_circles import ROOT, imports, modules

SPARK_FLOORS = ("enrich/spark/", "jobs/")
LIBRARY = ("enrich/", "connectors/")
DOZEN = 12
SOURCE = "enrich.spark.streams"
SINK = "enrich.spark.sink"


def imports_pyspark(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        if any(name == "pyspark" or name.startswith("pyspark.") for name in names):
            return True
    return False


def test_only_the_spark_floor_and_the_jobs_import_pyspark() -> None:
    outside = sorted(
        where
        for path in modules().values()
        if (where := str(path.relative_to(ROOT))).startswith(LIBRARY)
        and imports_pyspark(path)
        and not where.startswith(SPARK_FLOORS)
    )
    assert outside == []


def test_the_spark_floor_does_import_pyspark() -> None:
    # The check above reads real imports: it would find one here.
    assert imports_pyspark(ROOT / "enrich/spark/streams/stream_source.py")


def in_room(name: str, room: str) -> bool:
    return name == room or name.startswith(room + ".")


def test_the_source_and_the_sink_do_not_import_each_other() -> None:
    known = modules()
    crossings = sorted(
        (name, target)
        for name, path in known.items()
        for target in imports(name, path, known)
        if (in_room(name, SOURCE) and in_room(target, SINK))
        or (in_room(name, SINK) and in_room(target, SOURCE))
    )
    assert crossings == []


def test_the_source_and_the_sink_have_rooms_of_their_own() -> None:
    known = modules()
    assert any(in_room(name, SOURCE) and name != SOURCE for name in known)
    assert any(in_room(name, SINK) and name != SINK for name in known)


def entries(folder: Path) -> list[str]:
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())
    )


def test_no_folder_of_the_library_lists_more_than_a_dozen_entries() -> None:
    folders = [ROOT / "enrich", *(p.parent for p in (ROOT / "enrich").rglob("__init__.py"))]
    crowded = {str(f.relative_to(ROOT)): entries(f) for f in folders if len(entries(f)) > DOZEN}
    assert crowded == {}


SPI = "enrich.spi"
FLOORS_BELOW_CONNECTORS = ("enrich.engine", "enrich.lookup", "enrich.maps", "enrich.protect")


def test_connectors_come_in_through_the_spi_door() -> None:
    """A connector imports ``enrich.spi`` and ``enrich``'s public face, nothing else of
    enrich: the engine's insides may move without a connector noticing."""
    known = modules()
    reaching_in = sorted(
        (name, target)
        for name, path in known.items()
        if in_room(name, "connectors")
        for target in imports(name, path, known)
        if in_room(target, "enrich") and target not in (SPI, "enrich")
    )
    assert reaching_in == []


def test_the_floors_below_the_connectors_import_no_connector() -> None:
    known = modules()
    reaching_up = sorted(
        (name, target)
        for name, path in known.items()
        if any(in_room(name, floor) for floor in (*FLOORS_BELOW_CONNECTORS, SPI))
        for target in imports(name, path, known)
        if in_room(target, "connectors")
    )
    assert reaching_up == []
