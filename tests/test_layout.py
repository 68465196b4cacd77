"""The tests mirror the code: each test folder is named after the room it tests, so a
room's tests are found where its code is. ``tests/<room>/`` tests ``enrich/<room>/``
(``tests/spark/sink/`` tests ``enrich/spark/sink/``), ``tests/connectors/<room>/`` tests
``connectors/<room>/``, ``tests/jobs/`` tests ``jobs/`` and ``tests/deploy/`` tests
``deploy/``. A few suites cut across the rooms and keep their own names; a test of a
top-level module (``enrich/cli.py``, the public face, the floors) sits at the top of
``tests/``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# Suites that run the house end to end, or serve every folder.
ACROSS = frozenset({"integration", "exactly_once", "delta", "support"})


def room_of(folder: Path) -> Path:
    """The code folder a test folder mirrors."""
    parts = folder.relative_to(TESTS).parts
    if parts[0] in ("connectors", "jobs", "deploy"):
        return ROOT.joinpath(*parts)
    return ROOT.joinpath("enrich", *parts)


def test_every_test_folder_mirrors_a_folder_of_the_code() -> None:
    folders = {
        path.parent
        for path in TESTS.rglob("*.py")
        if path.parent != TESTS and "__pycache__" not in path.parts
    }
    astray = sorted(
        str(folder.relative_to(ROOT))
        for folder in folders
        if folder.relative_to(TESTS).parts[0] not in ACROSS and not room_of(folder).is_dir()
    )
    assert astray == [], f"test folders with no code folder of that name: {astray}"


def test_every_test_folder_is_a_package() -> None:
    """The tests import each other as ``tests.<room>.<module>``: every folder that holds a
    test has an ``__init__.py``."""
    missing = sorted(
        str(path.parent.relative_to(ROOT))
        for path in TESTS.rglob("test_*.py")
        if not (path.parent / "__init__.py").is_file()
    )
    assert missing == [], f"test folders without __init__.py: {missing}"


def test_the_rule_sees_a_folder_astray() -> None:
    """The mapping the first test relies on: a folder named after no code folder has no
    room."""
    assert room_of(TESTS / "spark" / "sink") == ROOT / "enrich" / "spark" / "sink"
    assert room_of(TESTS / "connectors" / "redis") == ROOT / "connectors" / "redis"
    assert room_of(TESTS / "jobs") == ROOT / "jobs"
    assert not room_of(TESTS / "mapping").is_dir()
