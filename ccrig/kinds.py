"""Kinds found by their modules: a package whose every module may define one kind of a thing (a testbed, a
workload, a link event) asks a Kinds to find them, so a new kind is one new module and nothing else changes.

    KINDS = Kinds(__name__, __path__, kind_of)       kind_of(module) -> {kind: class} that module defines
    KINDS = Kinds(..., skip={"base", "stats"})        modules that are the package's machinery, never searched
    KINDS.kinds()  KINDS.get(kind, field)  KINDS.union()   (a pydantic union discriminated by `kind`)

Modules are imported the first time a Kinds is asked, so running one module of the package as a program
(`python -m ...`) does not import it twice, and a module that does not import on this machine (a missing library)
is remembered with the reason, which using that kind then says.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Annotated, Callable, Union

from pydantic import Field

from .errors import InputError


def subclasses_with_kind(base: type) -> Callable:
    """kind_of for packages of pydantic models: every subclass of base a module defines whose `kind` field has a
    default of its own."""
    def kind_of(module) -> dict[str, type]:
        return {cls.model_fields["kind"].default: cls for cls in vars(module).values()
                if isinstance(cls, type) and issubclass(cls, base) and cls.__module__ == module.__name__
                and isinstance(cls.model_fields["kind"].default, str)}
    return kind_of


class Kinds:
    def __init__(self, package: str, path, kind_of: Callable, what: str, skip: frozenset[str] = frozenset()):
        self.package, self.path, self.kind_of, self.what = package, path, kind_of, what
        # a package whose kinds live beside its machinery (qdiscs/: the probe, the statistics, the BPF queue
        # monitor) names the machinery, so finding the kinds does not import what they do not need (numpy)
        self.skip = frozenset(skip)
        self._found: dict[str, type | str] | None = None

    def found(self) -> dict[str, type | str]:
        """kind -> its class, or the reason its module did not import here (named after the module)."""
        if self._found is None:
            found: dict[str, type | str] = {}
            for info in sorted(pkgutil.iter_modules(self.path), key=lambda i: i.name):
                if info.name in self.skip:
                    continue
                try:
                    module = importlib.import_module(f"{self.package}.{info.name}")
                except ImportError as e:
                    found[info.name] = str(e)
                    continue
                found.update(self.kind_of(module))
            self._found = found
        return self._found

    def kinds(self) -> list[str]:
        """Every kind's name, available here or not."""
        return sorted(self.found())

    def available(self) -> dict[str, type]:
        """The kinds whose modules import on this machine."""
        return {k: v for k, v in self.found().items() if not isinstance(v, str)}

    def get(self, kind: str, field: str) -> type:
        """The class of a kind; an unknown name, or one whose module is missing here, is an input error."""
        found = self.found().get(kind)
        if found is None:
            raise InputError(f"{field}: got {kind!r}; expected one of {', '.join(self.kinds())}")
        if isinstance(found, str):
            raise InputError(f"{field}: got {kind!r}, a {self.what} not available here: {found}")
        return found

    def union(self):
        """The pydantic type of a field holding one of the kinds, discriminated by `kind`."""
        found = self.available()
        return Annotated[Union[tuple(found[k] for k in sorted(found))], Field(discriminator="kind")]
