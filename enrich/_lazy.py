"""Names of a package loaded on first use (PEP 562), so that a process needing one part
of the package (the Redis data sources' runners) does not import the rest.

One module path per public name: a module that moves is imported from its new path only
(no alias of an old path is kept).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def loader(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``where`` maps each name to the module
    (relative to ``package``) that defines it; a loaded name is kept in ``namespace``."""

    def load(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        namespace[name] = value
        return value

    return load
