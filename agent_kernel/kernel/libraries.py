"""``import agent_libs.NAME``: the agent's libraries, imported straight from its DuckDB file.

A meta-path finder (importlib's finder/loader protocol) answers for the ``agent_libs``
package and its modules; nothing is written to disk. Installing it is cheap: the store is
opened on the first ``agent_libs`` import, not before. Libraries may import each other.

A loaded library is cached in ``sys.modules`` as any module is. When a library changes,
:func:`forget` drops every ``agent_libs`` module, so the next import loads the current
versions (a library holding another one gets the new one too); :func:`refresh` does the
same when the stored versions differ from the loaded ones (a change made elsewhere).

A library written after the agent had read untrusted content (its provenance is tainted,
see :mod:`agent_kernel.store.provenance`) may be a plant. It is imported only by the
session that wrote it, in an ``auto`` turn; anywhere else (another session, a read-only or
``ask`` turn, the user's own cell) the import raises :class:`ImportError` saying where it
came from and how the person reviews and clears it. Once a tool call loaded one, every
library is dropped from ``sys.modules`` after the call (:func:`drop_tainted`), so nothing
else gets it from the import cache.
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

    from agent_kernel.store import Store

PACKAGE = "agent_libs"

__all__ = ["PACKAGE", "LibraryFinder", "drop_tainted", "forget", "install", "refresh", "tainted_refusal"]

# Tainted libraries loaded by the session that wrote them, dropped after the call.
_TAINTED_LOADED: set[str] = set()
# Every library module this process's finder has loaded (what refresh checks: a scan of
# all of sys.modules costs about half a millisecond a turn in a kernel with pandas).
_LOADED: set[str] = set()


class LibraryFinder:
    """Finds and loads ``agent_libs`` and ``agent_libs.NAME`` from the store.

    A meta-path finder and its modules' loader by protocol (``find_spec``, ``exec_module``,
    ``get_source`` for tracebacks), without the ``importlib.abc`` bases: importing those
    costs more than ``%load_ext`` may spend."""

    def __init__(self, store: Callable[[], Store]) -> None:
        self.store = store

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == PACKAGE:
            return importlib.machinery.ModuleSpec(fullname, self._loader(), origin=PACKAGE, is_package=True)
        package, _, name = fullname.partition(".")
        if package != PACKAGE or not name.isidentifier():
            return None
        # Not read here: Python asks finders while holding its global import lock, and
        # opening the store may import DuckDB, which another thread may be importing.
        # The library is read when the module is executed.
        return importlib.machinery.ModuleSpec(fullname, self._loader(), origin=_filename(name))

    def _loader(self) -> Loader:
        """This finder as its modules' loader: one by protocol, not by base class."""
        return cast("Loader", self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        if spec is None or spec.name == PACKAGE:
            module.__path__ = []  # a package of nothing on disk
            return
        name = spec.name.partition(".")[2]
        library, origin = self._read_with_origin(name)
        spec.loader_state = library
        if library is None:
            raise ModuleNotFoundError(
                f"No library named {name!r} in the agent's store (list_libraries lists them).", name=spec.name
            )
        if origin is not None and origin.tainted:
            refusal = tainted_refusal(name, origin, _importing_turn())
            if refusal is not None:
                raise ImportError(refusal, name=spec.name)
            _TAINTED_LOADED.add(spec.name)
        _LOADED.add(spec.name)
        module.__file__ = spec.origin
        setattr(module, "__agent_lib_version__", library.version)  # noqa: B010 - an attribute of our own
        module.__doc__ = library.description
        code = compile(library.code, _filename(library.name), "exec", dont_inherit=True)
        exec(code, module.__dict__)  # noqa: S102 - the agent's own stored library

    def get_source(self, fullname: str) -> str | None:
        """The source of a loaded library (tracebacks show its lines through linecache)."""
        module = sys.modules.get(fullname)
        spec = getattr(module, "__spec__", None)
        if spec is not None and getattr(spec, "loader_state", None) is not None:
            code: str = spec.loader_state.code
            return code
        package, _, name = fullname.partition(".")
        found = self._read(name) if package == PACKAGE and name else None
        return found.code if found is not None else None

    def _read(self, name: str) -> Any:
        # The store stays out of what %load_ext imports (this module is on its path).
        from agent_kernel.store.agent_tools import Libraries  # noqa: PLC0415

        with self.store().connect() as con:
            return Libraries(con).get(name)

    def _read_with_origin(self, name: str) -> tuple[Any, Any]:
        """The current version of library ``name`` and its provenance record (or None)."""
        from agent_kernel.store import provenance  # noqa: PLC0415 - kept out of %load_ext: see _read
        from agent_kernel.store.agent_tools import Libraries  # noqa: PLC0415

        with self.store().connect() as con:
            library = Libraries(con).get(name)
            origin = provenance.latest(con, "library", [name]).get(name) if library is not None else None
        return library, origin


def tainted_refusal(name: str, origin: Any, turn: Any) -> str | None:
    """Why tainted library ``name`` (its provenance record ``origin``) may not be imported by
    ``turn`` (the running tool call's context, None outside a turn), or None when it may:
    only the session that wrote it after reading untrusted content itself, in an ``auto``
    turn (one that only edited a library tainted before has not read that content)."""
    if (
        turn is not None and turn.session_id == origin.session_id and turn.approve == "auto"
        and bool(turn.session_sources())
    ):  # fmt: skip
        return None
    return (
        f"agent_libs.{name} was written after the agent read untrusted content, so it is not imported here "
        f"({origin.provenance().label()}). Review it (read_library, or %agent_tainted) and clear it with "
        f"`%agent_tainted --clear library {name}` to import it."
    )


def _importing_turn() -> Any:
    """The context of the tool call importing now, or None (a user's cell, a script)."""
    tools = sys.modules.get("agent_kernel.tools")
    if tools is None:  # no turn ever ran in this process
        return None
    return tools._CONTEXT.get(None)


def drop_tainted() -> None:
    """After a tool call that loaded a tainted library: drop every loaded library (one that
    imported it holds it too), so no later import reuses it from the cache."""
    if _TAINTED_LOADED:
        _TAINTED_LOADED.clear()
        forget()


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
    for name in list(_LOADED):
        module = sys.modules.get(name)
        if module is None:
            _LOADED.discard(name)
        elif stored.get(name.partition(".")[2]) != getattr(module, "__agent_lib_version__", None):
            forget()
            return


def _filename(name: str) -> str:
    # A relative path that is not a file: linecache then asks the loader for the source.
    return f"{PACKAGE}/{name}.py"
