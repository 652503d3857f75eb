"""Provider modules loaded by the piece, to keep the offline plan short (issue 37).

`pulumi_gcp.compute` is one Python package of some 290 generated modules, and its `__init__.py` star-imports
every one of them (`from .autoscaler import *` ...) the first time the program touches `gcp.compute`: about
a second of CPU for the handful of resource classes the program uses. `pulumi_kubernetes.core.v1` and the
other generated packages are built the same way. A *thin* package stands in for such a package in
`sys.modules`: the same name, path and spec, but its `__init__.py` is not run; an attribute is imported, on
first use, from the one module whose `__all__` lists it, which is what `from .module import *` in that
`__init__.py` binds to the name. The classes are the provider's own (same module, same type token), so
the program and what it registers do not change; the plans are byte for byte the same (ci/plan_diff.py).

Anything the index does not answer (a name in no `__all__`, `from package import *`) loads the whole package
the ordinary way, into the same module object: slower, never different. Only the offline plan installs
this (plan_engine.run_program); `pulumi up` runs the program in the Pulumi CLI's own Python process.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path

# The provider distributions whose generated packages are thinned; a package they do not have is skipped.
PROVIDERS = ("pulumi_gcp", "pulumi_kubernetes")
_STAR = re.compile(r"^from \.(\w+) import \*$", re.MULTILINE)
_ALL = re.compile(r"^__all__ = \[", re.MULTILINE)


class ThinPackage(types.ModuleType):
    """A generated provider package whose members are imported one module at a time (module docstring)."""

    _index: dict[str, str] | None
    _whole: bool

    def __getattr__(self, name: str) -> object:  # only called when ordinary lookup fails
        if name.startswith("__") and name != "__all__":
            raise AttributeError(name)
        if not self._whole:
            where = self._where(name)
            if where is not None:
                value = importlib.import_module(f"{self.__name__}.{where}")
                if where != name or name in (self._index or {}):
                    value = getattr(value, name)
                setattr(self, name, value)
                return value
            self._load_whole()
        return types.ModuleType.__getattribute__(self, name)

    def __setattr__(self, name: str, value: object) -> None:
        # Importing a submodule binds it on its package (`organizations.get_project`, the module). Where the
        # package's star import binds that name to a member instead (the function `get_project`), the real
        # package ends with the member; leave the name unbound so __getattr__ answers with it.
        if isinstance(value, types.ModuleType) and not name.startswith("_") and not self.__dict__.get("_whole"):
            if self._where(name) != name or name in (self._index or {}):
                return
        types.ModuleType.__setattr__(self, name, value)

    def _where(self, name: str) -> str | None:
        """The submodule that defines `name` for `from package import name`, or None if unsure."""
        folder = Path(self.__spec__.submodule_search_locations[0])  # type: ignore[union-attr,index]
        if self._index is None:
            self._index = _index(folder)
        if name in self._index:  # star-imported last, so it wins over a submodule of the same name
            return self._index[name]
        if (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file():
            return name  # a submodule (`outputs`, `v1`): what the import system binds
        return None

    def _load_whole(self) -> None:
        """Runs the real `__init__.py` into this module, as the import system would have."""
        self._whole = True
        self.__spec__.loader.exec_module(self)  # type: ignore[union-attr]


def _index(folder: Path) -> dict[str, str]:
    """Name -> module, read from each `from .module import *` of `__init__.py` and that module's `__all__`,
    in order (a later star import wins, as it does when the package runs)."""
    index: dict[str, str] = {}
    for module in _STAR.findall((folder / "__init__.py").read_text()):
        for name in _all_of(folder / f"{module}.py"):
            index[name] = module
    return index


def _all_of(path: Path) -> list[str]:
    """A generated module's `__all__` (a literal list near its top), read without running the module."""
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as f:
        text = ""
        while chunk := f.read(1 << 16):
            text += chunk
            start = _ALL.search(text)
            end = text.find("]", start.end()) if start else -1
            if start and end != -1:
                names = ast.literal_eval(text[start.end() - 1 : end + 1])
                return [n for n in names if isinstance(n, str)]
    return []


def _thin(name: str, init: Path) -> None:
    """Puts a thin package for `name` in sys.modules, unless the real one was already loaded."""
    current = sys.modules.get(name)
    if current is not None and not _untouched(current):
        return  # in use (or thin already): left as it is
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])
    if spec is None:
        return
    module = ThinPackage(name)
    module.__spec__, module.__file__, module.__path__ = spec, str(init), [str(init.parent)]
    module.__package__, module.__loader__ = name, spec.loader
    module._index, module._whole = None, False
    sys.modules[name] = module
    parent, _, attr = name.rpartition(".")
    if parent in sys.modules:  # the parent's lazy attribute (pulumi's lazy_import) points at the thin one
        setattr(sys.modules[parent], attr, module)


def _untouched(module: types.ModuleType) -> bool:
    """A package pulumi's lazy_import registered but nothing has used yet (its __init__ has not run)."""
    return type(module).__name__ == "_LazyModule"


_installed: list[str] = []


def install() -> None:
    """Thins every generated package of the providers (once a process; a package in use stays as it is)."""
    if _installed:
        return
    _installed.append("yes")
    for provider in PROVIDERS:
        spec = importlib.util.find_spec(provider)  # a top-level name: found, not run
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(spec.submodule_search_locations[0])
        for init in sorted(root.glob("*/__init__.py")) + sorted(root.glob("*/*/__init__.py")):
            name = ".".join((provider, *init.parent.relative_to(root).parts))
            if isinstance(sys.modules.get(name), ThinPackage):
                continue
            if _STAR.search(init.read_text()):
                _thin(name, init)
