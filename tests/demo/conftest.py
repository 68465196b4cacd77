"""Fixtures of the demo services' tests: the dimension service on the test's loop."""

from __future__ import annotations

from tests.support.demo_service import service

__all__ = ("service",)
