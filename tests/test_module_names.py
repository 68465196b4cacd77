"""Names that are not repeated across the house: no two modules of the library share a
name (a file's, or a package folder's), so that a name found in a traceback, a log line
or a docstring leads to one place."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from tests.test_import_circles import ROOT

# The Spark floor's own repeats, left to its redesign (the engine, lookup and map floors
# have none): take an entry out as its modules are renamed. No entry may be added.


def module_names(package: Path, root: Path = ROOT) -> dict[str, list[str]]:
    """Each module name under ``package`` (a file's stem, a subpackage's folder name;
    ``__init__.py`` aside) with the places that bear it, relative to ``root``."""
    places: dict[str, list[str]] = defaultdict(list)
    for path in package.rglob("*.py"):
        if path.name != "__init__.py":
            places[path.stem].append(str(path.relative_to(root)))
        elif path.parent != package:
            places[path.parent.name].append(f"{path.parent.relative_to(root)}/")
    return {name: sorted(where) for name, where in places.items()}


def repeated(package: Path, root: Path = ROOT) -> dict[str, list[str]]:
    return {name: where for name, where in module_names(package, root).items() if len(where) > 1}


def test_the_check_finds_a_file_and_a_folder_of_one_name(tmp_path: Path) -> None:
    # The check below would find them: a settings.py twice, a join.py beside a join/.
    for place in ("pkg/a/settings.py", "pkg/b/settings.py", "pkg/join.py", "pkg/join/__init__.py"):
        (tmp_path / place).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / place).write_text("")
    assert repeated(tmp_path / "pkg", tmp_path) == {
        "join": ["pkg/join.py", "pkg/join/"],
        "settings": ["pkg/a/settings.py", "pkg/b/settings.py"],
    }


def test_no_two_modules_of_the_library_share_a_name() -> None:
    assert repeated(ROOT / "enrich") == {}


def test_the_floors_below_spark_repeat_no_name_of_the_house() -> None:
    everywhere = module_names(ROOT / "enrich")
    floors = ("enrich/engine/", "enrich/lookup/", "enrich/maps/", "enrich/protect/")
    shared = {
        name: where
        for name, where in everywhere.items()
        if len(where) > 1 and any(place.startswith(floors) for place in where)
    }
    assert shared == {}
