"""``.. traitlets-settings:: module.Class``: a settings reference generated from a class's traits.

reStructuredText (in MyST pages: inside ``{eval-rst}``).

Each configurable trait (``.tag(config=True)``) becomes a ``py:attribute`` entry with its
type, its default and its help string, so the reference cannot drift from the code and
``:py:attr:`AgentKernel.token_limit``` links to it. ``:own:`` lists only the traits the class
itself defines (a Jupyter Server extension inherits dozens). A trait without help is a
warning, which ``make test`` (``-W``) turns into a failure.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

logger = logging.getLogger(__name__)

_TYPES = {
    "Int": "int",
    "Float": "float",
    "Unicode": "str",
    "Bool": "bool",
    "Dict": "dict",
    "CaselessStrEnum": "str",
    "Enum": "str",
}
# Environment variables that change defaults (AGENT_KERNEL_MODEL, ...): the reference shows
# the defaults of a clean environment and the help says which variable changes them.
_ENV_PREFIX = "AGENT_KERNEL_"


def settings_of(cls: type, *, own: bool = False) -> list[tuple[str, Any]]:
    """The configurable traits of ``cls`` as (name, trait), in the order the class defines them."""
    traits = cls.class_own_traits(config=True) if own else cls.class_traits(config=True)
    order = [name for klass in reversed(cls.__mro__) for name in vars(klass) if name in traits]
    return [(name, traits[name]) for name in dict.fromkeys(order)]


def type_of(trait: Any) -> str:
    """The trait's type as Python spells it (``list[str]``, ``int``)."""
    kind = type(trait).__name__
    if kind == "List":
        inner = getattr(trait, "_trait", None)
        return f"list[{_TYPES.get(type(inner).__name__, 'object')}]" if inner is not None else "list"
    return _TYPES.get(kind, kind)


@contextmanager
def _clean_environment() -> Iterator[None]:
    saved = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIX)}
    for name in saved:
        del os.environ[name]
    try:
        yield
    finally:
        os.environ.update(saved)


def defaults_of(cls: type, names: list[str]) -> dict[str, Any]:
    """Each trait's default as an instance made in a clean environment has it (dynamic defaults too)."""
    with _clean_environment():
        try:
            instance = cls()
        except Exception:  # noqa: BLE001 - an application class may refuse to be built here
            instance = None
        return {
            name: getattr(instance, name) if instance is not None else cls.class_traits()[name].default()
            for name in names
        }


def default_text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    return repr(value)


def help_text(text: str) -> str:
    """The help string as literal reStructuredText: one paragraph, markup characters escaped."""
    return re.sub(r"([\\`*_|\[\]<>])", r"\\\1", " ".join(text.split()))


def choices_of(trait: Any) -> str:
    values = getattr(trait, "values", None)
    return ", ".join(f"``{v}``" for v in values) if values else ""


class TraitletsSettings(SphinxDirective):
    required_arguments = 1
    option_spec: ClassVar[dict[str, Callable[[str], Any]]] = {"own": lambda _: True}

    def run(self) -> list[nodes.Node]:
        path = self.arguments[0]
        module_name, _, class_name = path.rpartition(".")
        cls = getattr(importlib.import_module(module_name), class_name)
        settings = settings_of(cls, own="own" in self.options)
        defaults = defaults_of(cls, [name for name, _ in settings])
        lines = [f".. py:class:: {class_name}", f"   :module: {module_name}", ""]
        for name, trait in settings:
            if not (trait.help or "").strip():
                logger.warning(
                    "%s.%s has no help string: say what it does in the code", path, name, location=self.get_location()
                )
            lines += [
                f"   .. py:attribute:: {name}",
                f"      :type: {type_of(trait)}",
                f"      :value: {default_text(defaults[name])}",
                "",
                f"      {help_text(trait.help or '')}",
                "",
            ]
            choices = choices_of(trait)
            if choices:
                lines += [f"      One of {choices}.", ""]
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source=self.get_source_info()[0]), container)
        return container.children


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("traitlets-settings", TraitletsSettings)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
