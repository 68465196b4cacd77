"""Names of a package loaded on first use (PEP 562), so that a process needing one part
of the package (the Redis data sources' runners) does not import the rest; and the old
import paths of modules that moved to rooms of their own, kept for users' code."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.machinery import ModuleSpec
from types import ModuleType
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


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import paths of modules that moved, still importable: the old name gives the
    module object that lives at the new one (one module, so classes stay the same)."""

    def __init__(self) -> None:
        self.where: dict[str, str] = {}

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> ModuleSpec | None:
        if fullname not in self.where:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        return import_module(self.where[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        pass  # the module at the new path is already executed


_moved = _Moved()


def moved(package: str, where: Mapping[str, str]) -> None:
    """Keep the old paths of ``package``'s moved modules importable (the ones users were
    shown): ``where`` maps an old submodule name to its new one, both relative to
    ``package`` (``{"arrow_types": "dimension.arrow_types"}``)."""
    _moved.where.update({f"{package}.{old}": f"{package}.{new}" for old, new in where.items()})
    if _moved not in sys.meta_path:
        sys.meta_path.append(_moved)
