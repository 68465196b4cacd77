"""The public API is curated: everything exported exists, and nothing private leaks."""

from __future__ import annotations

import subprocess
import sys

import enrich
import enrich.spi
import enrich.testing


def test_all_names_exist_and_are_unique() -> None:
    for module in (enrich, enrich.testing, enrich.spi):
        assert len(set(module.__all__)) == len(module.__all__)
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name} is exported but missing"


def test_public_names_are_exactly_all() -> None:
    # dir(): the names are loaded on first use (PEP 562), vars() holds the loaded ones.
    public = {n for n in dir(enrich) if not n.startswith("_")}
    public -= {"annotations", "TYPE_CHECKING"}
    modules = {n for n in public if type(getattr(enrich, n)).__name__ == "module"}
    assert public - modules == set(enrich.__all__)


def test_the_package_loads_its_parts_on_first_use() -> None:
    # The Redis data sources' runners import enrich.spark.streams / sink: the package
    # must not load the engine, the lookups and numpy with them.
    code = (
        "import sys, enrich; loaded = 'numpy' in sys.modules or "
        "'enrich.lookup.cache.lookup_cache' in sys.modules; "
        "print(loaded, enrich.LookupCache.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "enrich.lookup.cache.lookup_cache"]


def test_the_engine_imports_no_pyspark() -> None:
    code = "import sys, enrich, enrich.testing; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_fixed_names_of_the_operator_api() -> None:
    for name in (
        "AsyncFunction",
        "ResultFuture",
        "ordered_wait",
        "unordered_wait",
        "OutputMode",
        "Watermark",
        "FixedDelayRetry",
        "ExponentialBackoffRetry",
        "EnrichError",
        "LookupTimeout",
    ):
        assert name in enrich.__all__
    assert issubclass(enrich.LookupTimeout, TimeoutError)
    assert issubclass(enrich.LookupTimeout, enrich.EnrichError)


def test_the_blocking_iterator_has_one_name() -> None:
    # Its former name (AsyncWaitIterator) said async of an iterator that blocks: gone.
    assert not hasattr(enrich, "AsyncWaitIterator")
    assert "AsyncWaitIterator" not in enrich.__all__

    async def one(value: int) -> list[int]:
        return [value]

    it = enrich.ordered_wait([1, 2], one)
    assert isinstance(it, enrich.WaitIterator)
    assert list(it) == [1, 2]


def test_settings_are_keyword_arguments_not_an_exported_object() -> None:
    # Every entry point takes the settings as keyword arguments and builds the one
    # settings object itself; users never need the class, only the chunk size it derives.
    assert "JoinSettings" not in enrich.__all__
    assert "chunk_rows" in enrich.__all__
    assert (
        enrich.chunk_rows(100) == enrich.lookup.join_settings.JoinSettings(capacity=100).chunk_rows
    )
