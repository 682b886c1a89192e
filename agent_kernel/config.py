"""``AgentKernel``: the settings a user changes with ``%config AgentKernel.<name> = ...``.

Only traitlets is imported here, so loading the extension stays cheap. Every trait is
read when a turn starts, so a ``%config`` change applies to the next ``%agent``.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, List, TraitError, Unicode, default, validate
from traitlets.config import Configurable

if TYPE_CHECKING:
    from traitlets import HasTraits, TraitType
    from typing_extensions import TypedDict  # generic TypedDicts need Python 3.11's typing

    _Value = TypeVar("_Value")

    class _Proposal(TypedDict, Generic[_Value]):
        """What traitlets passes a ``@validate`` method: the trait, the value proposed for it, its owner."""

        trait: TraitType[Any, Any]
        value: _Value
        owner: HasTraits


__all__ = ["APPROVE_MODES", "DEFAULT_MODEL", "DEFAULT_TOOL_GROUPS", "MCP_GROUP", "TOOL_GROUPS", "AgentKernel"]

DEFAULT_MODEL = "claude-sonnet-5-5"
# ``mcp`` names the tools of the MCP servers, which ``mcp_servers`` switches on: they are
# offered whenever it names a server, and listing the group adds nothing.
MCP_GROUP = "mcp"
TOOL_GROUPS = (
    "code", "data", "memory", "ui", "schedule", "skills", "user", "web", "tools", "llm", "browser", MCP_GROUP,
)  # fmt: skip
# Offered unless configured otherwise: every group but ``browser`` (a real Chromium the
# agent drives, which the user switches on). Only the core tools' definitions are
# loaded in each request; the model finds the others with the API's tool search (see
# tool_search below and agent_kernel.tools.definitions).
DEFAULT_TOOL_GROUPS = tuple(g for g in TOOL_GROUPS if g not in ("browser", MCP_GROUP))
APPROVE_MODES = ("auto", "ask", "read-only")


class AgentKernel(Configurable):
    """Configuration of the agent that works in this kernel."""

    model = Unicode(help="Claude model for %agent turns (env AGENT_KERNEL_MODEL sets the default).").tag(config=True)

    max_tokens = Int(8192, help="max_tokens of each model call.").tag(config=True)

    token_limit = Int(
        10_000_000,
        help="Tokens (input + output) a session may use before it stops with state "
        "token_limit_reached; tokens read from the prompt cache count a tenth, as they are "
        "billed. The default lets a day's work run (a 300-turn session in a 200,000-token "
        "window uses about 6,000,000) and stops a session that loops without end. Raise it "
        "per turn with --token-limit.",
    ).tag(config=True)

    max_model_calls = Int(40, help="Model calls one turn may make before it stops (a runaway-loop guard).").tag(
        config=True
    )

    model_retries = Int(
        3,
        help="Retries of a model call that failed mid-stream with overloaded_error "
        "(the SDK itself retries 408/409/429/5xx before the stream starts).",
    ).tag(config=True)

    db_path = Unicode(
        "",
        help="Path of the agent's DuckDB file. Empty: AGENT_KERNEL_DB, else the user data dir.",
    ).tag(config=True)

    approve = CaselessStrEnum(
        APPROVE_MODES,
        default_value="auto",
        help="auto: tools run at once; ask: writing tools wait for Run/Skip; "
        "read-only: only reading tools are offered.",
    ).tag(config=True)

    tools_enabled = Bool(True, help="Master switch: False offers the model no tools at all.").tag(config=True)

    tool_groups = List(
        Unicode(),
        default_value=list(DEFAULT_TOOL_GROUPS),
        help=f"Tool groups offered to the model, any of {', '.join(TOOL_GROUPS)} (all but browser "
        "and mcp by default); leave a group out to switch it off, add browser to let the agent drive "
        "Chromium. The MCP servers' tools (mcp) are offered whenever mcp_servers names a server.",
    ).tag(config=True)

    tool_search = Bool(
        True,
        help="Defer the tools outside the core set (run_code, inspect_namespace, db_sql, db_schema, "
        "memory, render_blocks, ask_user, send_message, report_result and your @tool functions): "
        "each request loads only the core definitions and the model finds the others, MCP "
        "servers' tools included, with the API's tool search when a task needs them. Models "
        "without tool search (Claude 3, Opus 4 and 4.1, Sonnet 4) get every offered tool "
        "loaded. False: every offered tool is loaded in every request.",
    ).tag(config=True)

    mcp_servers = Dict(
        help="MCP servers whose tools the model gets, named SERVER__TOOL: "
        '{name: {"command": ..., "args": [...], "env": {...}}} for a stdio server, '
        '{name: {"url": ..., "headers": {...}}} for a streamable HTTP server. Each starts '
        "on the first turn after it is set and runs until the kernel exits. What a server "
        "sends is untrusted content, and each of its tools counts as writing (asked for in "
        'ask mode, not offered in read-only) unless the entry says "trusted": true: then '
        "a tool the server marks readOnlyHint is believed to only read.",
    ).tag(config=True)

    mcp_timeout = Float(30.0, help="Seconds an MCP server may take to start or to answer one tool call.").tag(
        config=True
    )

    @validate("mcp_servers")
    def _valid_mcp_servers(self, proposal: _Proposal[dict[object, object]]) -> dict[object, object]:
        servers = proposal["value"]
        entries: dict[str, dict[object, object]] = {}
        for name, entry in servers.items():
            if not isinstance(name, str) or not name.strip() or len(name) > 64:
                raise TraitError(f"mcp_servers names are 1 to 64 characters, not {name!r}.")
            if not isinstance(entry, dict):
                raise TraitError(
                    f"mcp_servers[{name!r}] must be a dict such as "
                    '{"command": ..., "args": [...]} or {"url": ...}, not ' + f"{type(entry).__name__}."
                )
            if "trusted" in entry and not isinstance(entry["trusted"], bool):
                raise TraitError(f'mcp_servers[{name!r}]["trusted"] must be True or False, not {entry["trusted"]!r}.')
            entries[name] = entry
        before = self.mcp_servers
        widened = {
            name for name, entry in entries.items()
            if name not in before or (entry.get("trusted") is True and before[name].get("trusted") is not True)
        }  # fmt: skip
        _persons_to_widen("mcp_servers", widened)
        return servers

    skills_dir = Unicode(
        "",
        help="Folder of Agent Skills (NAME/SKILL.md with name and description front matter) "
        "offered with the skills group; empty: skills/ in agent-kernel's data directory.",
    ).tag(config=True)

    timezone = Unicode("", help="IANA timezone for dates in the system prompt; empty: the machine's.").tag(config=True)

    updates_per_second = Float(15.0, help="Most display updates per second while text streams in.").tag(config=True)

    result_chars = Int(20_000, help="Largest tool result (in characters) sent back to the model.").tag(config=True)

    image_feedback = Bool(
        True,
        help="Send the images run_code's code displays (figures, PNG/JPEG outputs, Vega-Lite "
        "charts rasterised) back to the model, downscaled to at most 1,568 px on the long side.",
    ).tag(config=True)

    images_per_result = Int(
        4, help="Most images one run_code result sends the model (0 to 20); the result says how many were left out."
    ).tag(config=True)

    images_per_turn = Int(8, help="Most images one turn sends the model (0 to 100), over all its run_code calls.").tag(
        config=True
    )

    # -- widgets and the person at the notebook -----------------------------------------

    presence_timeout = Float(
        5.0,
        help="Seconds a waiting widget (form, question, approval, Continue) may take to be "
        "displayed by a front end before the turn decides nobody is there to answer.",
    ).tag(config=True)

    table_page_size = Int(25, help="Rows per page of a table block.").tag(config=True)

    @default("model")
    def _default_model(self) -> str:
        return os.environ.get("AGENT_KERNEL_MODEL") or DEFAULT_MODEL

    @validate("timezone")
    def _valid_timezone(self, proposal: _Proposal[str]) -> str:
        name = proposal["value"]
        if name:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError):
                raise TraitError(f"Unknown timezone {name!r}; use an IANA name such as 'Europe/Paris'.") from None
        return name

    @validate(
        "max_tokens",
        "token_limit",
        "max_model_calls",
        "result_chars",
        "sql_timeout_s",
        "sql_max_rows",
        "sql_threads",
        "db_max_mb",
        "into_max_rows",
        "into_max_mb",
        "fetch_max_bytes",
        "fetch_timeout_s",
        "web_max_uses",
    )
    def _positive(self, proposal: _Proposal[float]) -> float:
        if proposal["value"] <= 0:
            raise TraitError(f"{proposal['trait'].name} must be positive, not {proposal['value']}.")
        return proposal["value"]

    # -- instructions, guarded SQL -------------------------------------------------------

    instruction = Unicode(
        "",
        help="Your standing instruction to the agent, put in every system prompt (blank: none). "
        "The agent's own stored instructions (%agent_prompt) come after it.",
    ).tag(config=True)

    @validate("instruction")
    def _bounded_instruction(self, proposal: _Proposal[str]) -> str:
        # Imported here: config imports nothing of the store at load.
        from agent_kernel.store.prompts import INSTRUCTIONS_CHARS

        value = proposal["value"]
        if len(value) > INSTRUCTIONS_CHARS:
            raise TraitError(
                f"instruction is {len(value):,} characters, over its cap of {INSTRUCTIONS_CHARS:,}: it is "
                "sent with every request. Keep it short and put longer guidance in a file the agent reads."
            )
        return value

    sql_timeout_s = Float(5.0, help="Seconds one db_sql call may run before it is stopped.").tag(config=True)

    sql_max_rows = Int(1000, help="Most rows db_sql returns to the model; it says truncated: true beyond that.").tag(
        config=True
    )

    sql_memory_limit = Unicode("1GB", help="DuckDB memory limit of the connection db_sql runs the model's SQL on.").tag(
        config=True
    )

    sql_threads = Int(4, help="Most DuckDB threads for the model's SQL (never more than the machine's cores).").tag(
        config=True
    )

    db_max_mb = Int(
        2048,
        help="Size cap in MB of the model's own DuckDB file (its ai_* objects, beside the store): a db_sql write "
        "that grows it past the cap is rolled back.",
    ).tag(config=True)

    retention_full_days = Int(
        90,
        help="Days the store keeps tool results, code run outputs and scheduled runs' output notebooks "
        "and logs in full; older ones are pruned to a stub that says what was there (at most once a day, "
        "and by agent-kernel store prune). The conversation's text, tool inputs, code and every summary "
        "are kept whatever this says. 0: keep everything in full.",
    ).tag(config=True)

    @validate("retention_full_days")
    def _valid_retention(self, proposal: _Proposal[int]) -> int:
        if proposal["value"] < 0:
            raise TraitError(f"retention_full_days is a number of days (0: keep everything), not {proposal['value']}.")
        return proposal["value"]

    into_max_rows = Int(
        10_000_000,
        help="Most rows db_sql into= puts in a kernel variable; the result says when it was cut.",
    ).tag(config=True)

    into_max_mb = Int(
        1024,
        help="Most MB (in Arrow memory) db_sql into= puts in a kernel variable; the result says when it was cut.",
    ).tag(config=True)

    overwrite_protected_names = Bool(
        False,
        help="Let tools that write a kernel variable (db_sql into=) replace a builtin's name "
        "(print, list) or a module you imported (np, pd). Dunder names are never written.",
    ).tag(config=True)

    secret_env = List(
        Unicode(),
        default_value=[],
        help="Names of environment variables that hold secrets (papermill, scheduled jobs, "
        "JupyterHub, CI). Code reads them as os.environ[NAME]; the model is told the names, "
        "never the values, and every value is redacted from what it sees and what is stored.",
    ).tag(config=True)

    @default("secret_env")
    def _default_secret_env(self) -> list[str]:
        # How the scheduler (and anyone starting a kernel) declares them without %config.
        return os.environ.get("AGENT_KERNEL_SECRET_ENV", "").replace(",", " ").split()

    @validate("secret_env")
    def _valid_secret_env(self, proposal: _Proposal[list[str]]) -> list[str]:
        bad = [n for n in proposal["value"] if not str(n).isidentifier()]
        if bad:
            raise TraitError(f"secret_env takes environment variable names; {', '.join(map(repr, bad))} is not one.")
        return list(proposal["value"])

    secret_hosts = Dict(
        key_trait=Unicode(),
        value_trait=List(Unicode()),
        default_value={},
        help="The hosts each secret may be sent to: {'NAME': ['api.example.com', 'other.example:8443']} "
        "(exact host names or addresses; without a port, any port). {secret:NAME} in fetch_url and "
        "browser_type goes to these hosts only, in every mode; a secret bound to no host (here or "
        "with %agent_secret NAME --host HOST) asks you once per host, and is refused when nobody can "
        "answer. A trust change: refused while an agent turn runs.",
    ).tag(config=True)

    @validate("secret_hosts")
    def _valid_secret_hosts(self, proposal: _Proposal[dict[str, list[str]]]) -> dict[str, list[str]]:
        from agent_kernel.authority import inside_turn
        from agent_kernel.secrets import MOST_HOSTS, parse_host

        value = proposal["value"]
        if inside_turn():
            raise TraitError(
                "secret_hosts is the person's to change, not code running inside an agent turn: "
                "set it in your own cell after the turn."
            )
        if len(value) > MOST_HOSTS:
            raise TraitError(f"secret_hosts names at most {MOST_HOSTS} secrets.")
        checked: dict[str, list[str]] = {}
        for name, hosts in value.items():
            if not str(name).isidentifier():
                raise TraitError(f"secret_hosts takes environment variable names as keys; {name!r} is not one.")
            if len(hosts) > MOST_HOSTS:
                raise TraitError(f"secret_hosts binds a secret to at most {MOST_HOSTS} hosts; {name} has {len(hosts)}.")
            try:
                checked[name] = [str(parse_host(host)) for host in hosts]
            except ValueError as exc:
                raise TraitError(f"secret_hosts[{name!r}]: {exc}") from None
        return checked

    secret_env_ignore = List(
        Unicode(),
        default_value=[],
        help="Environment variables that look like credentials (named *_API_KEY, *_TOKEN, "
        "*SECRET*, *PASSWORD*, ..., or holding a URL with a password) but are not secrets "
        "to redact: the model sees their values. Every other such variable is redacted like "
        "a secret_env one, and the model is told its name.",
    ).tag(config=True)

    @validate("secret_env_ignore")
    def _valid_secret_env_ignore(self, proposal: _Proposal[list[str]]) -> list[str]:
        bad = [n for n in proposal["value"] if not str(n).isidentifier()]
        if bad:
            raise TraitError(
                f"secret_env_ignore takes environment variable names; {', '.join(map(repr, bad))} is not one."
            )
        return list(proposal["value"])

    # -- the web (tool group "web") -------------------------------------------------------

    fetch_allow = List(
        Unicode(),
        default_value=[],
        help="Hosts, addresses and networks fetch_url may reach although they are not public "
        "(e.g. ['intranet.example', '*.corp.example', '10.0.0.5', '10.0.0.0/8']); also lifts "
        "the port restriction for them.",
    ).tag(config=True)

    @validate("fetch_allow")
    def _valid_fetch_allow(self, proposal: _Proposal[list[str]]) -> list[str]:
        value = list(proposal["value"])
        _persons_to_widen("fetch_allow", set(value) - set(self.fetch_allow))
        return value

    fetch_max_bytes = Int(
        1_000_000, help="Most bytes of a body fetch_url reads; it says truncated: true beyond that."
    ).tag(config=True)

    fetch_timeout_s = Float(20.0, help="Seconds one fetch_url call may take, redirects included.").tag(config=True)

    web_allowed_domains = List(
        Unicode(),
        default_value=[],
        help="Only these domains appear in web_search results and may be read with web_fetch "
        "(passed to the API; cannot be combined with web_blocked_domains).",
    ).tag(config=True)

    web_blocked_domains = List(
        Unicode(),
        default_value=[],
        help="Domains web_search and web_fetch never use (passed to the API; cannot be combined "
        "with web_allowed_domains).",
    ).tag(config=True)

    web_max_uses = Int(
        5, help="Most web_search (and most web_fetch) uses in one model request (the API's max_uses)."
    ).tag(config=True)

    @validate("web_allowed_domains", "web_blocked_domains")
    def _one_domain_list(self, proposal: _Proposal[list[str]]) -> list[str]:
        name = proposal["trait"].name
        other = "web_blocked_domains" if name == "web_allowed_domains" else "web_allowed_domains"
        if proposal["value"] and getattr(self, other):
            raise TraitError(
                f"{name} and {other} cannot both be set (the API takes one or the other); "
                f"clear {other} first: %config AgentKernel.{other} = []"
            )
        return list(proposal["value"])

    # -- the context budget ----------------------------------------------------------------

    context_window = Int(
        0,
        help="The model's context window in tokens; 0: from the model's name (200,000 for the "
        "Claude models and for a model not known).",
    ).tag(config=True)

    compact_at = Float(
        0.7,
        help="Share of context_window a request may reach: past it the conversation is compacted "
        "(old tool results shortened, then the oldest turns summarised by small_model).",
    ).tag(config=True)

    compaction = CaselessStrEnum(
        ("client", "server"),
        default_value="client",
        help="client: the agent compacts (summary stored in DuckDB, reused by every kernel); "
        "server: the API compacts (its beta context_management compaction, for models that "
        "support it).",
    ).tag(config=True)

    small_model = Unicode(
        "claude-haiku-4-5",
        help="Small, fast Claude model for side tasks: conversation summaries, and llm_generate "
        "/ agent_kernel.llm.generate with intelligence='low' (the default).",
    ).tag(config=True)

    medium_model = Unicode(
        DEFAULT_MODEL, help="Claude model for llm_generate / agent_kernel.llm.generate with intelligence='medium'."
    ).tag(config=True)

    large_model = Unicode(
        "claude-opus-5-5", help="Claude model for llm_generate / agent_kernel.llm.generate with intelligence='high'."
    ).tag(config=True)

    summary_idle_minutes = Float(
        30.0,
        help="Minutes without a message after which a session counts as idle: the next turn "
        "(or the notebook's next session) first has small_model write the session's short "
        "summary, which search_sessions and session_timeline read and the next session's "
        "first turn is shown (after %agent --new too). 0: no session summaries.",
    ).tag(config=True)

    @validate("summary_idle_minutes")
    def _valid_summary_idle_minutes(self, proposal: _Proposal[float]) -> float:
        if proposal["value"] < 0:
            raise TraitError(f"summary_idle_minutes is minutes (0: no summaries), not {proposal['value']}.")
        return proposal["value"]

    @validate("images_per_result", "images_per_turn")
    def _valid_image_counts(self, proposal: _Proposal[int]) -> int:
        value, name = proposal["value"], proposal["trait"].name
        most = 20 if name == "images_per_result" else 100
        if not 0 <= value <= most:
            raise TraitError(f"{name} is a number of images from 0 to {most}, not {value}.")
        return value

    @validate("context_window")
    def _valid_context_window(self, proposal: _Proposal[int]) -> int:
        value = proposal["value"]
        if value != 0 and value < 1_000:
            raise TraitError(f"context_window is in tokens: 0 (from the model) or at least 1,000, not {value}.")
        return value

    @validate("compact_at")
    def _valid_compact_at(self, proposal: _Proposal[float]) -> float:
        value = proposal["value"]
        if not 0.1 <= value <= 0.95:
            raise TraitError(f"compact_at is a share of context_window between 0.1 and 0.95, not {value}.")
        return value

    # -- usage, cost and thinking ---------------------------------------------------------

    cost_limit = Float(
        0.0,
        help="USD a session may spend before it stops with state cost_limit_reached (Continue "
        "raises it). 0: no limit. Calls to a model without a price are not counted.",
    ).tag(config=True)

    prices = Dict(
        default_value={},
        help="Prices by model name, USD per million tokens, added to or replacing the built-in "
        'list: {"my-model": {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}}. '
        "cache_write and cache_read default to 1.25x and 0.1x input. A model with no price "
        "shows tokens and no cost.",
    ).tag(config=True)

    thinking = Unicode(
        "",
        help="Claude's extended thinking for every turn: off (empty), adaptive, low, medium, "
        "high or max (the effort of adaptive thinking; a thinking budget on Claude 4.5 and "
        "earlier). Per turn: %agent --think [LEVEL].",
    ).tag(config=True)

    @validate("cost_limit")
    def _valid_cost_limit(self, proposal: _Proposal[float]) -> float:
        if proposal["value"] < 0:
            raise TraitError(f"cost_limit is USD per session (0 for none), not {proposal['value']}.")
        return proposal["value"]

    @validate("prices")
    def _valid_prices(self, proposal: _Proposal[dict[str, object]]) -> dict[str, object]:
        from agent_kernel.model.prices import price_from_setting

        for model, value in proposal["value"].items():
            try:
                price_from_setting(value)
            except ValueError as exc:
                raise TraitError(f"prices[{model!r}]: {exc}.") from None
        return proposal["value"]

    @validate("thinking")
    def _valid_thinking(self, proposal: _Proposal[str]) -> str:
        from agent_kernel.model.thinking import LEVELS, OFF

        value = proposal["value"].strip().lower()
        if value not in OFF and value not in LEVELS:
            raise TraitError(f"thinking must be off or one of {', '.join(LEVELS)}, not {proposal['value']!r}.")
        return "" if value in OFF else value

    # -- sub-sessions (spawn_session) ----------------------------------------------------

    subsession_max_depth = Int(
        3, help="How deeply sub-sessions may nest: a session's children are depth 1, theirs 2, ..."
    ).tag(config=True)

    subsession_max_children = Int(10, help="Sub-sessions one session may have running at the same time.").tag(
        config=True
    )

    subsession_timeout_s = Float(
        120.0, help="Seconds a sub-session may run before it is stopped (status error, 'timed out')."
    ).tag(config=True)

    subsession_token_limit = Int(
        200_000,
        help="Most tokens (input + output) a sub-session may use, whatever spawn_session asks; "
        "never more than its parent session has left of its own token_limit (a sub-session's "
        "tokens and cost count against its parent).",
    ).tag(config=True)

    @validate("subsession_max_depth", "subsession_max_children", "subsession_timeout_s", "subsession_token_limit")
    def _positive_subsession(self, proposal: _Proposal[float]) -> float:
        if proposal["value"] <= 0:
            raise TraitError(f"{proposal['trait'].name} must be positive, not {proposal['value']}.")
        return proposal["value"]

    def now(self) -> datetime:
        """The current time in the configured timezone (the machine's when none is set)."""
        if self.timezone:
            from zoneinfo import ZoneInfo

            return datetime.now(ZoneInfo(self.timezone))
        return datetime.now().astimezone()


def _persons_to_widen(setting: str, widened: set[str]) -> None:
    """Refuse a change that widens ``setting`` (a new server, a newly trusted one, a new
    host) while an agent turn runs: trusting a server or reaching a private host is the
    person's decision, not that of code the model runs (see :mod:`agent_kernel.authority`).
    Narrowing it is always allowed."""
    from agent_kernel.authority import inside_turn

    if widened and inside_turn():
        raise TraitError(
            f"{setting} is the person's to widen ({', '.join(sorted(widened))}), not code running inside "
            "an agent turn: set it in your own cell after the turn."
        )
