"""``import agent_libs.NAME``: the agent's libraries, imported straight from its DuckDB file.

A meta-path finder (importlib's finder/loader protocol) answers for the ``agent_libs``
package and its modules; nothing is written to disk. Installing it is cheap: the store is
opened on the first ``agent_libs`` import, not before. Libraries may import each other.

A loaded library is cached in ``sys.modules`` as any module is. When a library changes,
:func:`forget` drops every ``agent_libs`` module, so the next import loads the current
versions (a library holding another one gets the new one too); :func:`refresh` does the
same when the stored versions differ from the loaded ones (a change made elsewhere).
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import Store

PACKAGE = "agent_libs"

__all__ = ["PACKAGE", "LibraryFinder", "forget", "install", "refresh"]


class LibraryFinder:
    """Finds and loads ``agent_libs`` and ``agent_libs.NAME`` from the store.

    A meta-path finder and its modules' loader by protocol (``find_spec``, ``exec_module``,
    ``get_source`` for tracebacks), without the ``importlib.abc`` bases: importing those
    costs more than ``%load_ext`` may spend."""

    def __init__(self, store: Callable[[], Store]) -> None:
        self.store = store

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == PACKAGE:
            return importlib.machinery.ModuleSpec(fullname, self, origin=PACKAGE, is_package=True)
        package, _, name = fullname.partition(".")
        if package != PACKAGE or not name.isidentifier():
            return None
        # Not read here: Python asks finders while holding its global import lock, and
        # opening the store may import DuckDB, which another thread may be importing.
        # The library is read when the module is executed.
        return importlib.machinery.ModuleSpec(fullname, self, origin=_filename(name))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        if spec is None or spec.name == PACKAGE:
            module.__path__ = []  # a package of nothing on disk
            return
        name = spec.name.partition(".")[2]
        library = spec.loader_state = self._read(name)
        if library is None:
            raise ModuleNotFoundError(
                f"No library named {name!r} in the agent's store (list_libraries lists them).", name=spec.name
            )
        module.__file__ = spec.origin
        module.__agent_lib_version__ = library.version
        module.__doc__ = library.description
        code = compile(library.code, _filename(library.name), "exec", dont_inherit=True)
        exec(code, module.__dict__)  # noqa: S102 - the agent's own stored library

    def get_source(self, fullname: str) -> str | None:
        """The source of a loaded library (tracebacks show its lines through linecache)."""
        module = sys.modules.get(fullname)
        spec = getattr(module, "__spec__", None)
        if spec is not None and getattr(spec, "loader_state", None) is not None:
            return spec.loader_state.code
        package, _, name = fullname.partition(".")
        found = self._read(name) if package == PACKAGE and name else None
        return found.code if found is not None else None

    def _read(self, name: str) -> Any:
        from .store.agent_tools import Libraries

        with self.store().connect() as con:
            return Libraries(con).get(name)


def install(store: Callable[[], Store]) -> LibraryFinder:
    """Make ``agent_libs`` importable in this process, reading from ``store()`` when imported.

    Installing again only points the finder at the new store.
    """
    for finder in sys.meta_path:
        if isinstance(finder, LibraryFinder):
            finder.store = store
            return finder
    finder = LibraryFinder(store)
    sys.meta_path.append(finder)
    return finder


def forget() -> None:
    """Drop every loaded library, so the next import reads the stored versions."""
    for name in [n for n in sys.modules if n.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    package = sys.modules.get(PACKAGE)
    if package is not None:
        for name in [n for n in vars(package) if not n.startswith("__")]:
            delattr(package, name)


def refresh(stored: dict[str, int]) -> None:
    """Forget the loaded libraries when any differs from ``stored`` (name -> version)."""
    for name, module in list(sys.modules.items()):
        if name.startswith(PACKAGE + ".") and stored.get(name.partition(".")[2]) != getattr(
            module, "__agent_lib_version__", None
        ):
            forget()
            return


def _filename(name: str) -> str:
    # A relative path that is not a file: linecache then asks the loader for the source.
    return f"{PACKAGE}/{name}.py"
