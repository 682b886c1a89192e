"""Compact, bounded descriptions of the user's variables, for the model.

A DataFrame is described by its shape, its columns with dtypes and a few sample values,
never by a copy of its data. Objects that define ``_repr_llm_`` describe themselves
(the protocol of rgbkrk/repr_llm). Private names, modules and IPython's own names are
skipped. Nothing here imports pandas, polars or numpy: types are recognised by name.
"""

from __future__ import annotations

import builtins
import inspect
import keyword
import re
import reprlib
import types
from collections.abc import Iterable, Mapping
from typing import Any

from agent_kernel.secrets import redact

MAX_VARIABLES = 60
MAX_COLUMNS = 40
SAMPLE_VALUES = 3
SUMMARY_CHARS = 300
BRIEFING_CHARS = 4000

_IPYTHON_NAMES = {"In", "Out", "exit", "quit", "get_ipython", "open"}
_REDACTED_ENDS = 16_000  # characters of each end of a long string redacted for its summary


class _Repr(reprlib.Repr):
    """``reprlib`` that redacts secrets before it shortens, so a cut never ends inside one."""

    fillvalue = "..."  # reprlib's own from Python 3.11 (an instance attribute there)

    def repr_str(self, x: str, level: int) -> str:
        # reprlib shows only the string's head and tail: redact those ends (with a margin
        # wider than any secret), never a copy of all of a long string.
        if len(x) > 2 * _REDACTED_ENDS:
            return super().repr_str(redact(x[:_REDACTED_ENDS]) + redact(x[-_REDACTED_ENDS:]), level)
        return super().repr_str(redact(x), level)

    def repr_bytes(self, x: bytes, level: int) -> str:
        if len(x) > 2 * _REDACTED_ENDS:
            x = x[:_REDACTED_ENDS] + x[-_REDACTED_ENDS:]
        return self.repr_instance(x, level)

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            text = redact(builtins.repr(x))
        except Exception:  # noqa: BLE001 - as reprlib does
            return f"<{type(x).__name__} instance at {id(x):#x}>"
        if len(text) > self.maxother:
            i = max(0, (self.maxother - 3) // 2)
            j = max(0, self.maxother - 3 - i)
            text = text[:i] + self.fillvalue + text[len(text) - j :]
        return text


_repr = _Repr()
_repr.maxstring = 80
_repr.maxother = 80
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 8
_repr.maxlevel = 2


def user_names(namespace: Mapping[str, Any], hidden: Iterable[str] = ()) -> list[str]:
    """Names a user defined: no ``_private`` names, modules or IPython's own names."""
    skip = set(hidden) | _IPYTHON_NAMES
    return [
        name
        for name, value in namespace.items()
        if not name.startswith("_") and name not in skip and not isinstance(value, types.ModuleType)
    ]


def unwritable_reason(name: str, namespace: Mapping[str, Any], *, overwrite: bool = False) -> str | None:
    """Why a tool may not write the kernel variable ``name`` (None: it may).

    Refused: anything but a plain identifier, Python keywords, dunder names (``__builtins__``
    and its like run the kernel) and IPython's own names; and, unless ``overwrite``, the
    name of a builtin (``print``) or of a module the user imported (``np``).
    """
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        return f"{name!r} is not a Python variable name."
    if name.startswith("__") and name.endswith("__"):
        return f"{name!r} is a special (dunder) name of Python or the kernel; choose another name."
    if name in _IPYTHON_NAMES - {"open"}:
        return f"{name!r} is one of IPython's own names; choose another name."
    if overwrite:
        return None
    setting = " (the user can allow it with %config AgentKernel.overwrite_protected_names = True)"
    if isinstance(namespace.get(name), types.ModuleType):
        return f"{name!r} is the module {namespace[name].__name__} the user imported; choose another name{setting}."
    if hasattr(builtins, name):
        return f"{name!r} is a Python builtin; choose another name{setting}."
    return None


def describe(name: str, value: Any) -> dict[str, Any]:
    """One variable: ``{name, type, summary, shape?, columns?}``."""
    kind = _type_name(value)
    entry: dict[str, Any] = {"name": name, "type": kind}
    llm = getattr(type(value), "_repr_llm_", None)
    if callable(llm):
        entry["summary"] = _bounded(_safe(lambda: llm(value)))
    elif _is_dataframe(value):
        entry.update(_describe_frame(value))
    elif _module_root(value) == "numpy" and hasattr(value, "shape"):
        entry["shape"] = list(value.shape)
        entry["summary"] = f"dtype {value.dtype}"
    elif _is_series(value):
        entry["shape"] = [len(value)]
        entry["summary"] = f"dtype {value.dtype}; head {_repr.repr(list(value.head(SAMPLE_VALUES)))}"
    elif inspect.isfunction(value) or inspect.isbuiltin(value):
        entry["summary"] = f"{name}{_safe(lambda: str(inspect.signature(value)))}"
        doc = inspect.getdoc(value)
        if doc:
            entry["summary"] += f" - {doc.splitlines()[0]}"
    elif inspect.isclass(value):
        entry["summary"] = f"class {value.__name__}"
    elif isinstance(value, (str, bytes)):
        entry["summary"] = f"{len(value)} chars: {_repr.repr(value)}"
    elif isinstance(value, (list, tuple, set, frozenset, dict)):
        entry["summary"] = f"{len(value)} items: {_safe(lambda: _repr.repr(value))}"
    else:
        entry["summary"] = _bounded(_safe(lambda: _repr.repr(value)))
    return entry


def describe_namespace(
    namespace: Mapping[str, Any], hidden: Iterable[str] = (), names: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Describe ``names`` (or every user variable, up to :data:`MAX_VARIABLES`)."""
    if names is None:
        chosen = user_names(namespace, hidden)[-MAX_VARIABLES:]
    else:
        chosen = [n for n in names if n in namespace]
    return [describe(name, namespace[name]) for name in chosen]


def briefing_lines(namespace: Mapping[str, Any], hidden: Iterable[str] = ()) -> dict[str, str]:
    """One Markdown list line per user variable (up to :data:`MAX_VARIABLES`), by name."""
    lines = {}
    for entry in describe_namespace(namespace, hidden):
        line = f"- `{entry['name']}` ({entry['type']}"
        if "shape" in entry:
            line += f", shape {tuple(entry['shape'])}"
        line += ")"
        if entry.get("columns"):
            cols = ", ".join(f"{c['name']}: {c['dtype']}" for c in entry["columns"][:12])
            more = len(entry["columns"]) - 12
            line += f" columns {cols}" + (f" (+{more} more)" if more > 0 else "")
        elif entry.get("summary"):
            line += f": {entry['summary']}"
        lines[entry["name"]] = redact(line.replace("\n", " "))  # as the stored message holds it
    return lines


def briefing(namespace: Mapping[str, Any], hidden: Iterable[str] = (), limit: int = BRIEFING_CHARS) -> str:
    """A short Markdown list of the user's variables."""
    return _bounded_list(list(briefing_lines(namespace, hidden).values()), limit)


# The per-turn variable list (see prompt.turn_context): its first line says which kind it is.
ALL_VARIABLES = "Variables in the kernel (all of them):"
CHANGED_VARIABLES = "Variables in the kernel changed since the last list (the others are as listed before):"
UNCHANGED_VARIABLES = "Variables in the kernel: unchanged since the last list."
NO_VARIABLES = "Variables in the kernel: none."
REMOVED = "Removed:"
_LISTED = re.compile(r"^- `([^`]+)`")


def variables_update(current: Mapping[str, str], known: Mapping[str, str] | None, limit: int = BRIEFING_CHARS) -> str:
    """The variables part of a turn's context: every variable when ``known`` is None (the
    conversation holds no list yet), else only those added, changed or removed since."""
    if known is None:
        return f"{ALL_VARIABLES}\n{_bounded_list(list(current.values()), limit)}" if current else NO_VARIABLES
    changed = [line for name, line in current.items() if known.get(name) != line]
    removed = [name for name in known if name not in current]
    if not changed and not removed:
        return UNCHANGED_VARIABLES
    parts = [CHANGED_VARIABLES]
    if changed:
        parts.append(_bounded_list(changed, limit))
    if removed:
        parts.append(f"{REMOVED} " + ", ".join(f"`{name}`" for name in removed))
    return "\n".join(parts)


def known_variables(texts: Iterable[str], earlier: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The variables as the model last saw them, from earlier :func:`variables_update`
    texts (oldest first); None when none holds a list. ``earlier``: what the texts before
    these gave, so a conversation's later texts continue it without reading all again."""
    known: dict[str, str] | None = dict(earlier) if earlier is not None else None
    for text in texts:
        lines = text.splitlines()
        for line in lines:
            if line in (ALL_VARIABLES, NO_VARIABLES) or (line == CHANGED_VARIABLES and known is None):
                known = {}
            elif known is None or line == UNCHANGED_VARIABLES:
                continue
            elif line.startswith(REMOVED):
                for name in re.findall(r"`([^`]+)`", line[len(REMOVED) :]):
                    known.pop(name, None)
            elif (listed := _LISTED.match(line)) is not None:
                known[listed.group(1)] = line
    return known


def _bounded_list(lines: list[str], limit: int) -> str:
    text = "\n".join(lines)
    if len(text) > limit:
        text = redact(text)  # before the cut
    if len(text) > limit:
        text = text[:limit].rsplit("\n", 1)[0] + "\n- ... (more: call inspect_namespace)"
    return text


# -- helpers ------------------------------------------------------------------------------


def _describe_frame(frame: Any) -> dict[str, Any]:
    shape = list(frame.shape)
    columns = []
    for column in list(frame.columns)[:MAX_COLUMNS]:
        series = frame[column]
        samples = _safe_list(lambda s=series: _non_null_head(s))
        columns.append(
            {
                "name": str(column),
                "dtype": str(series.dtype),
                "samples": [_repr.repr(v) for v in samples],
            }
        )
    summary = f"{shape[0]} rows x {shape[1]} columns"
    if shape[1] > MAX_COLUMNS:
        summary += f" (first {MAX_COLUMNS} columns listed)"
    return {"shape": shape, "columns": columns, "summary": summary}


def _non_null_head(series: Any) -> list[Any]:
    head: list[Any]
    if _module_root(series) == "polars":
        head = series.drop_nulls().head(SAMPLE_VALUES).to_list()
    else:
        head = series.dropna().head(SAMPLE_VALUES).tolist()
    return head


def _is_dataframe(value: Any) -> bool:
    return type(value).__name__ == "DataFrame" and _module_root(value) in {"pandas", "polars"}


def _is_series(value: Any) -> bool:
    return type(value).__name__ == "Series" and _module_root(value) in {"pandas", "polars"}


def _module_root(value: Any) -> str:
    return (type(value).__module__ or "").split(".", 1)[0]


def _type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__
    return cls.__qualname__ if module in ("builtins", "__main__") else f"{module.split('.')[0]}.{cls.__qualname__}"


def _bounded(text: str) -> str:
    if len(text) <= SUMMARY_CHARS:
        return text
    text = redact(text)  # before the cut
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 3] + "..."


def _safe(make: Any) -> str:
    try:
        return str(make())
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ must not break a turn
        return f"<unavailable: {type(exc).__name__}>"


def _safe_list(make: Any) -> list[Any]:
    try:
        return list(make())
    except Exception:  # noqa: BLE001
        return []
