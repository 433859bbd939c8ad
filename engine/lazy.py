"""Names of a package imported from their modules on first use (PEP 562 `__getattr__`).

A package whose `__init__` should stay light declares which module holds each public name;
the first access imports that module and keeps the value in the package's namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from importlib import import_module
from typing import Any


def lazy_names(exports: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Each exported name and its module, from each module and the names it holds."""
    return {name: module for module, names in exports.items() for name in names}


def lazy_getattr(
    package: str, namespace: MutableMapping[str, Any], lazy: Mapping[str, str]
) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` (its `globals()` as `namespace`): `lazy` names the
    module of each name."""

    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
