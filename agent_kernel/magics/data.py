"""Magics over what the agent stores: ``%agent_stats``, ``%agent_failures``, ``%agent_prompt``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.core.magic import line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from agent_kernel.magics.args import parse_args, usage_errors
from agent_kernel.magics.companion import CompanionMagics

if TYPE_CHECKING:
    from agent_kernel.display.text_tables import Markdown, Table, Tables
    from agent_kernel.store.prompts import PromptVersion
    from agent_kernel.store.usage import DayUsage

__all__ = ["DataMagics"]

CODE_LINES = 12
CODE_CHARS = 800


@magics_class
class DataMagics(CompanionMagics):
    """The agent's audit trail and its stored instructions, for the person at the notebook."""

    @magic_arguments()
    @argument("days", nargs="?", type=int, default=7, metavar="DAYS", help="Days back (default 7).")
    @line_magic
    def agent_stats(self, line: str = "") -> Tables:
        """Code the agent ran in the last DAYS days: runs, successes, failures, mean duration,
        the most common error categories, and its tool calls; then its model calls per day
        and model: input tokens (and the share read from the prompt cache), output tokens,
        and cost in USD (for models with a price: see AgentKernel.prices). The source column
        says what made the calls: turn (%agent turns) or completion (inline completion in
        JupyterLab, made by the server extension).
        """
        from agent_kernel.display.text_tables import Table, Tables

        args = parse_args(self.agent_stats, line)
        if args.days <= 0:
            raise UsageError("DAYS must be a positive number of days.")
        found, days = self.agent.admin.stats(args.days)
        share = f" ({found.succeeded / found.executions:.0%})" if found.executions else ""
        rows: list[list[str]] = [
            ["code runs", f"{found.executions:,}"],
            ["succeeded", f"{found.succeeded:,}{share}"],
            ["failed", f"{found.failed:,}"],
            ["mean duration", f"{found.mean_ms:,.0f} ms" if found.mean_ms is not None else "-"],
        ]
        rows += [[f"  {category} errors", f"{count:,}"] for category, count in found.categories]
        rows.append(["tool calls", f"{found.tool_calls:,} ({found.tool_errors:,} errors)"])
        if found.top_tools:
            rows.append(["most used", ", ".join(f"{tool} {n:,}" for tool, n in found.top_tools)])
        rows.append(["store", self.agent.admin.store_size().text()])
        period = "day" if args.days == 1 else f"{args.days} days"
        runs = Table(["", "value"], rows, title=f"Agent code runs, last {period}")
        return Tables(runs, _usage_table(days, period))

    @magic_arguments()
    @argument("n", nargs="?", type=int, default=5, metavar="N", help="Failures shown (default 5).")
    @line_magic
    def agent_failures(self, line: str = "") -> Table:
        """The code and the error of the agent's last N failed code runs, newest first."""
        from agent_kernel.display.text_tables import Table

        args = parse_args(self.agent_failures, line)
        if args.n <= 0:
            raise UsageError("N must be a positive number.")
        found = self.agent.admin.failures(args.n)
        rows = [
            [
                f"{f.created_at:%Y-%m-%d %H:%M} UTC",
                f.session or "",
                f.category or "runtime",
                _clip(f"{f.error_type or 'Error'}: {f.error_message or ''}", 300),
                _clip_code(f.code),
            ]
            for f in found
        ]
        note = "" if rows else "No failed code runs recorded."
        return Table(["when", "session", "category", "error", "code"], rows, title="Failed agent code runs", note=note)

    @magic_arguments()
    @argument("--rollback", type=int, metavar="VERSION", help="Make VERSION current again (as a new version).")
    @argument("--history", action="store_true", help="List every version.")
    @argument("--full", action="store_true", help="Show the whole system prompt the next turn sends.")
    @argument("--clear", action="store_true", help="Blank the stored instructions (as a new version).")
    @line_cell_magic
    def agent_prompt(self, line: str = "", cell: str | None = None) -> Markdown | Table | None:
        """Show the agent's stored instructions with their version, or change them.

        The stored instructions are the part of the system prompt the agent edits itself
        (edit_system_prompt) and you can edit too. Every change is a new version.

            %agent_prompt                 show the current version
            %%agent_prompt                the cell body becomes the new text
            %agent_prompt --clear         no stored instructions (a new, blank version)
            %agent_prompt --history       every version
            %agent_prompt --rollback N    restore version N (0 is the empty prompt)
            %agent_prompt --full          the whole system prompt of the next turn

        Your own fixed instruction goes in %config AgentKernel.instruction.
        """
        args = parse_args(self.agent_prompt, line)
        chosen = (args.rollback is not None, args.history, args.full, args.clear, cell is not None)
        if sum(chosen) > 1:
            raise UsageError("Use one of --rollback, --history, --full, --clear, or a %%agent_prompt cell.")
        agent = self.agent
        if args.full:
            with usage_errors():
                full = agent.system_prompt()
            return _markdown_block("The system prompt of the next turn", full)
        admin = agent.admin
        if cell is not None or args.clear:
            with usage_errors():
                saved = admin.save_instructions((cell or "").strip(), clear=args.clear)
            print(f"Stored instructions saved as version {saved.version}.")
            return None
        if args.rollback is not None:
            with usage_errors():
                saved = admin.restore_instructions(args.rollback)
            print(f"Restored version {args.rollback}; it is now version {saved.version}.")
            return None
        if args.history:
            return _history_table(admin.instruction_versions())
        current, tainted = admin.instructions()
        return _show_version(current, tainted=tainted)


def _show_version(current: PromptVersion, *, tainted: bool = False) -> Markdown:
    from agent_kernel.display.text_tables import Markdown

    if current.version == 0:
        return Markdown(
            "**Stored instructions**: none yet (version 0). The agent adds some with "
            "edit_system_prompt; you can write them with a `%%agent_prompt` cell."
        )
    when = f"{current.created_at:%Y-%m-%d %H:%M} UTC" if current.created_at else ""
    head = f"**Stored instructions**, version {current.version} ({current.operation} by {current.author}, {when})"
    body = _fenced(current.prompt) if current.prompt.strip() else "*(blank: no stored instructions)*"
    foot = "History: `%agent_prompt --history` · restore: `%agent_prompt --rollback N`"
    if tainted:
        foot = (
            "**Written after the agent read untrusted content**: the model sees it as data, not "
            "as instructions, until you review it and run `%agent_tainted --clear prompt system`.\n\n" + foot
        )
    return Markdown(f"{head}\n\n{body}\n\n{foot}")


def _history_table(versions: list[PromptVersion]) -> Table:
    from agent_kernel.display.text_tables import Table

    rows = [
        [
            str(v.version),
            f"{v.created_at:%Y-%m-%d %H:%M}" if v.created_at else "",
            v.author,
            v.operation,
            f"{len(v.prompt):,}",
            _clip(v.prompt.strip().splitlines()[0] if v.prompt.strip() else "(blank)", 60),
        ]
        for v in versions
    ]
    note = "" if rows else "No versions yet: version 0 is the empty prompt."
    return Table(
        ["version", "when (UTC)", "by", "operation", "chars", "starts with"],
        rows,
        title="Stored instructions",
        note=note,
    )


def _markdown_block(title: str, text: str) -> Markdown:
    from agent_kernel.display.text_tables import Markdown

    return Markdown(f"**{title}**\n\n{_fenced(text)}")


def _fenced(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _usage_table(days: list[DayUsage], period: str) -> Table:
    from agent_kernel.display.footer import usd
    from agent_kernel.display.text_tables import Table

    rows = []
    for d in days:
        share = f" ({d.cache_read / d.prompt_tokens:.0%} from cache)" if d.prompt_tokens else ""
        if d.cost is None:
            cost = "no price"
        else:
            cost = usd(d.cost) + (f" + {d.unpriced:,} unpriced" if d.unpriced else "")
        rows.append([
            f"{d.day:%Y-%m-%d}", d.model, d.source, f"{d.calls:,}", f"{d.prompt_tokens:,}{share}",
            f"{d.output_tokens:,}", cost,
        ])  # fmt: skip
    total = sum(d.cost or 0.0 for d in days)
    note = "No model calls recorded." if not rows else f"Total {usd(total)} (UTC days; priced calls only)."
    completions = sum(d.cost or 0.0 for d in days if d.source == "completion")
    if completions:
        note += f" Inline completion: {usd(completions)}."
    return Table(
        ["day", "model", "source", "calls", "input tokens", "output tokens", "cost"], rows,
        title=f"Model calls, last {period}", note=note,
    )  # fmt: skip


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_code(code: str) -> str:
    lines = code.strip("\n").splitlines()
    shown = "\n".join(lines[:CODE_LINES])
    if len(lines) > CODE_LINES:
        shown += f"\n… ({len(lines) - CODE_LINES} more lines)"
    return _clip(shown, CODE_CHARS)
