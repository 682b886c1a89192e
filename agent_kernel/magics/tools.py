"""Magics over what the model can use: ``%agent_tools``, ``%agent_skills`` and ``%agent_tainted``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.core.magic import line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from agent_kernel.config import APPROVE_MODES
from agent_kernel.magics.args import parse_args
from agent_kernel.magics.companion import CompanionMagics

if TYPE_CHECKING:
    from agent_kernel.authority import PersonEvent
    from agent_kernel.display.text_tables import Table
    from agent_kernel.store.provenance import Record
    from agent_kernel.tools import Tool

__all__ = ["ToolMagics"]


@magics_class
class ToolMagics(CompanionMagics):
    """The tools and skills the agent has, and where each comes from."""

    @magic_arguments()
    @argument(
        "--approve",
        default=None,
        metavar="MODE",
        help=f"List what a turn in this approval mode sees ({', '.join(APPROVE_MODES)}; default the setting).",
    )
    @line_magic
    def agent_tools(self, line: str = "") -> Table:
        """Every tool the model can call in the next turn, its group, whether it changes
        things, and where it comes from: built in, a @tool function, defined by the agent,
        or an MCP server (configured servers start with the next turn)."""
        from agent_kernel.display.text_tables import Table

        args = parse_args(self.agent_tools, line)
        mode = (args.approve or self.agent.config.approve).lower()
        if mode not in APPROVE_MODES:
            raise UsageError(f"--approve takes one of {', '.join(APPROVE_MODES)}, not {args.approve!r}.")
        offered = self.agent._offered(mode)
        builtin = _builtin_names()
        rows = [[t.name, t.group, _writes(t), _source(t, builtin)] for t in offered]
        running = set(self.agent._mcp.running()) if self.agent._mcp is not None else set()
        waiting = [n for n in self.agent.config.mcp_servers if n not in running]
        rows += [[f"{n}__*", "mcp", "", f"MCP server {n} (starts with the next turn)"] for n in waiting]
        note = "" if offered else "No tools are offered (tools_enabled is False or tool_groups is empty)."
        return Table(["tool", "group", "writes", "from"], rows, title=f"Tools the model sees ({mode})", note=note)

    @magic_arguments()
    @line_magic
    def agent_skills(self, line: str = "") -> Table:
        """Every skill: name, description, whether it is enabled (listed in the system
        prompt), and where it comes from (stored, or a SKILL.md in AgentKernel.skills_dir)."""
        from agent_kernel.display.text_tables import Table

        parse_args(self.agent_skills, line)
        folder, found = self.agent.admin.skills(self.agent.config.skills_dir)
        rows = [[s.name, s.description, "yes" if s.enabled else "no", s.source] for s in found]
        offered = "skills" in self.agent.config.tool_groups
        note = f"Skills folder: {folder}." + (
            "" if offered else " The skills group is off: %config AgentKernel.tool_groups adds it."
        )
        return Table(["skill", "description", "enabled", "from"], rows, title="Skills", note=note)

    @magic_arguments()
    @argument("--clear", nargs=2, metavar=("KIND", "NAME"), help="Clear one item's taint after you reviewed it.")
    @argument("--clear-all", action="store_true", help="Clear every taint (you reviewed everything listed).")
    @line_magic
    def agent_tainted(self, line: str = "") -> Table | None:
        """What the agent kept after it had read untrusted content (a web page, a fetched
        file, an MCP result): tools, libraries, skills, memories, notepads, stored
        instructions, table comments, jobs. Such text reaches the model only as data
        (inside <untrusted_content> tags, never as instruction), and such jobs stay
        disabled, until you review the item and clear it.

            %agent_tainted                       list what is tainted
            %agent_tainted --clear KIND NAME     clear one item (KIND as listed, e.g. memory 3f2a...)
            %agent_tainted --clear-all           clear everything listed
        """
        from agent_kernel.display.text_tables import Table
        from agent_kernel.store import provenance

        args = parse_args(self.agent_tainted, line)
        if args.clear and args.clear_all:
            raise UsageError("Use --clear KIND NAME or --clear-all, not both.")
        if args.clear:
            kind, name = args.clear
            if kind not in provenance.KINDS:
                raise UsageError(f"KIND is one of {', '.join(provenance.KINDS)}, not {kind!r}.")
        admin = self.agent.admin
        if args.clear or args.clear_all:
            by = _persons_event(line)
        if args.clear:
            if not admin.clear_taint(kind, name, by=by):
                raise UsageError(f"No tainted {kind} named {name!r}; %agent_tainted lists them.")
            print(f"Cleared {kind} {name}: it is trusted as the person's own from now on.")
            return None
        if args.clear_all:
            print(f"Cleared {admin.clear_taint(by=by)} tainted item(s).")
            return None
        found = admin.tainted()
        rows = [_tainted_row(r) for r in found]
        note = (
            "Nothing kept is tainted." if not rows
            else "Review each item, then %agent_tainted --clear KIND NAME (or --clear-all)."
        )  # fmt: skip
        return Table(
            ["kind", "name", "version", "session", "turn", "sources", "when (UTC)"],
            rows,
            title="Tainted items",
            note=note,
        )


def _persons_event(line: str) -> PersonEvent:
    """The person's event of ``%agent_tainted LINE``; a UsageError while an agent turn runs
    (then the magic was called by code the model runs, not typed by the person)."""
    from agent_kernel.authority import TrustRefused, person

    try:
        return person("magic", f"%agent_tainted {line}")
    except TrustRefused as exc:
        raise UsageError(f"%agent_tainted {line.strip()} was refused: {exc}") from None


def _tainted_row(record: Record) -> list[str]:
    shown = "; ".join(s[:80] for s in record.sources[:2])
    more = f" (+{len(record.sources) - 2})" if len(record.sources) > 2 else ""
    return [
        record.kind,
        record.name,
        "" if record.version is None else str(record.version),
        (record.session_id or "")[:8],
        "" if record.turn is None else str(record.turn),
        shown + more,
        f"{record.created_at:%Y-%m-%d %H:%M}" if record.created_at else "",
    ]


def _builtin_names() -> set[str]:
    from agent_kernel.tools.builtin import builtin_registry

    return set(builtin_registry().tools)


def _writes(item: Tool) -> str:
    if callable(item.writes):
        return "some calls"
    return "yes" if item.writes else ""


def _source(item: Tool, builtin: set[str]) -> str:
    from agent_kernel.tools import USER_TOOLS

    server = getattr(item, "server", "")
    if server:
        return f"MCP server {server}"
    if item.name in builtin:
        return "built in"
    if USER_TOOLS.get(item.name) is item:
        module = getattr(item.function, "__module__", "") or ""
        return "@tool in this kernel" if module == "__main__" else f"@tool in {module}"
    return "defined by the agent (stored)"
