"""The testbeds, one module each, found by their `kind`: a module of this folder that names its class
`TESTBED` is the testbed of that name (netns.py is `testbed: netns`). A new testbed is one module here plus its
tests: the spec, preflight, cleanup and the runner ask the registry and the class, never a list of names.

Modules are imported the first time the registry is asked (mininet's imports Debian's Mininet): a testbed whose
module cannot be imported on this machine stays known by name, and using it says why it is missing.
"""
from __future__ import annotations

import importlib
import pkgutil

from ccrig.errors import InputError
from ..testbed import Testbed

_FOUND: dict[str, type[Testbed] | str] | None = None


def _found() -> dict[str, type[Testbed] | str]:
    """kind -> the class, or the reason its module did not import."""
    global _FOUND
    if _FOUND is None:
        found: dict[str, type[Testbed] | str] = {}
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
            try:
                module = importlib.import_module(f"{__name__}.{info.name}")
            except ImportError as e:
                found[info.name] = f"{e}"
                continue
            cls = getattr(module, "TESTBED", None)
            if cls is not None:
                found[cls.kind] = cls
        _FOUND = found
    return _FOUND


def kinds() -> list[str]:
    """Every testbed's name, available here or not."""
    return sorted(_found())


def available() -> dict[str, type[Testbed]]:
    """The testbeds whose modules import on this machine."""
    return {k: v for k, v in _found().items() if not isinstance(v, str)}


def get(kind: str, field: str = "testbed") -> type[Testbed]:
    """The testbed class of a kind; a name that is unknown, or whose module is missing here, is an input error."""
    found = _found().get(kind)
    if found is None:
        raise InputError(f"{field}: got {kind!r}; expected one of {', '.join([*kinds(), 'auto'])}")
    if isinstance(found, str):
        raise InputError(f"{field}: got {kind!r}, which is not available here: {found}")
    return found
