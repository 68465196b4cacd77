"""Which pyspark the tests run on, and a skip for tests that need a newer one.

CI runs the Spark-facing tests on pyspark 3.5 and 4.0 too (``./scripts/dev test-compat``);
a test of a feature an older Spark lacks says so with ``requires_spark``.
"""

from __future__ import annotations

import pytest


def spark_version() -> tuple[int, int]:
    """The installed pyspark's (major, minor)."""
    import pyspark

    major, minor = pyspark.__version__.split(".")[:2]
    return int(major), int(minor)


def requires_spark(major: int, minor: int, reason: str) -> pytest.MarkDecorator:
    """Skip on a pyspark older than ``major.minor``; the skip names the version and why."""
    return pytest.mark.skipif(
        spark_version() < (major, minor), reason=f"needs pyspark >= {major}.{minor}: {reason}"
    )
