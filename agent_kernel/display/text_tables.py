"""Read-only output of the magics and the CLI: a :class:`Table` and a :class:`Markdown` text.

Both show as HTML in a notebook and as aligned plain text in a terminal. The paged,
sortable table block the model shows is another thing: :mod:`.table_widget`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from agent_kernel.display.safe import markdown_html


class Table:
    """Rows under a header, shown as HTML in a notebook and as text in a terminal."""

    def __init__(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        title: str = "",
        note: str = "",
        right: Sequence[int] = (),
    ) -> None:
        """``right``: the indices of columns aligned right (numbers)."""
        self.columns = list(columns)
        self.rows = [["" if v is None else str(v) for v in row] for row in rows]
        self.title = title
        self.note = note
        self.right = set(right)

    def _align(self, index: int) -> str:
        return "right" if index in self.right else "left"

    def _repr_html_(self) -> str:
        head = "".join(
            f"<th style='text-align:{self._align(i)}'>{html.escape(c)}</th>" for i, c in enumerate(self.columns)
        )
        cell = "<td style='text-align:{};vertical-align:top;white-space:pre-wrap'>{}</td>"
        body = "".join(
            "<tr>" + "".join(cell.format(self._align(i), html.escape(v)) for i, v in enumerate(row)) + "</tr>"
            for row in self.rows
        )
        title = f"<strong>{html.escape(self.title)}</strong>" if self.title else ""
        note = f"<div style='color:#57606a'>{html.escape(self.note)}</div>" if self.note else ""
        return f"{title}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"

    def _pad(self, index: int, text: str, width: int) -> str:
        return text.rjust(width) if index in self.right else text.ljust(width)

    def __repr__(self) -> str:
        widths = [len(c) for c in self.columns]
        for row in self.rows:
            widths = [max([w, *map(len, v.splitlines())]) for w, v in zip(widths, row)]
        line = "  ".join(self._pad(i, c, w) for i, (c, w) in enumerate(zip(self.columns, widths)))
        rule = "  ".join("-" * w for w in widths)
        body = []
        for row in self.rows:  # a cell of several lines makes the row as tall
            cells = [v.splitlines() or [""] for v in row]
            for i in range(max(map(len, cells), default=1)):
                body.append(
                    "  ".join(
                        self._pad(j, c[i] if i < len(c) else "", w) for j, (c, w) in enumerate(zip(cells, widths))
                    )
                )
        parts = ([self.title] if self.title else []) + [line, rule, *body]
        if self.note:
            parts.append(self.note)
        return "\n".join(p.rstrip() for p in parts)


class Tables:
    """Several tables, one under the other."""

    def __init__(self, *tables: Table) -> None:
        self.tables = list(tables)

    def _repr_html_(self) -> str:
        return "<br>".join(t._repr_html_() for t in self.tables)

    def __repr__(self) -> str:
        return "\n\n".join(repr(t) for t in self.tables)


class Markdown:
    """Markdown text that also reads as plain text; shown as sanitised HTML, since the text
    may hold what the model wrote (see :mod:`.safe`)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_html_(self) -> str:
        return markdown_html(self.text)

    def __repr__(self) -> str:
        return self.text
