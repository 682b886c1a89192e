"""A small stdio MCP server for the tests (the official ``mcp`` package's FastMCP):
notes kept as files in the folder given as its argument."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

FOLDER = Path(sys.argv[1])
server = FastMCP("notes")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(name: str) -> str:
    """Read the note called name."""
    path = FOLDER / f"{name}.txt"
    if not path.exists():
        raise ValueError(f"no note called {name}")
    return path.read_text()


@server.tool()
def write_note(name: str, text: str) -> str:
    """Write text to the note called name."""
    (FOLDER / f"{name}.txt").write_text(text)
    return f"saved {name}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def crash() -> str:
    """Stop the server at once (for the tests)."""
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
