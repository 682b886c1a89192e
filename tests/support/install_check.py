"""Every tool called once, by a script run with nothing but an installed agent-kernel.

tests/test_install.py runs this file with the Python of a fresh virtual environment that
holds the built wheel alone (no test extras): it imports only the installed package and
the standard library. A turn of ``Agent.run()`` against the scripted model calls each
tool the kernel dispatches (``web_search`` and ``web_fetch`` run at the API, and are only
offered), then writes one JSON object to ``--report``: for each tool called, whether its
result was an error and the start of its text (the turn's transcript goes to stdout).
``--mcp-only CMD`` instead starts an MCP server as CMD (the reference ``mcp-server-time``)
and calls its ``get_current_time``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MARKER = "INSTALL-CHECK"
SUBTASK = "SUBTASK-COUNT"
SIDE_PROMPT = "SIDE-CALL classify"

Step = list[tuple[str, dict[str, Any]]]

CODE = (
    "import pandas as pd\n"
    "sales = pd.DataFrame({'region': ['North', 'South', 'North'], 'revenue': [1.5, 2.5, 4.0]})\n"
    "print(len(sales))"
)
CHART = {
    "type": "chart", "chartType": "bar", "title": "Revenue",
    "data": {"labels": ["North", "South"], "datasets": [{"label": "revenue", "data": [5.5, 2.5]}]},
}  # fmt: skip


def first_steps(page_url: str) -> Step:
    return [
        ("run_code", {"code": CODE}),
        ("inspect_namespace", {"names": ["sales"]}),
        ("notebook_cells", {}),
        ("db_sql", {"sql": "SELECT region, sum(revenue) AS total FROM sales GROUP BY region", "into": "totals"}),
        ("db_schema", {}),
        ("set_state", {"key": "last_region", "value": {"name": "North"}}),
        ("get_state", {"key": "last_region"}),
        ("list_state_keys", {}),
        ("delete_state", {"key": "last_region"}),
        ("memory", {"action": "store", "content": "Prefers totals by region.", "category": "preference"}),
        ("read_system_prompt", {}),
        ("edit_system_prompt", {"operation": "append", "content": "Answer briefly."}),
        ("search_sessions", {"query": "sales"}),
        ("session_timeline", {}),
        ("write_notepad", {"content": "Totals are in `totals`."}),
        ("update_notepad", {"operation": "append", "content": "Checked."}),
        ("read_notepad", {}),
        ("create_scheduled_task", {"name": "nightly totals", "task": "Total the sales.", "cron": "0 3 * * *"}),
        ("list_scheduled_tasks", {}),
        ("set_reminder", {"at": "2099-01-01T09:00:00Z", "message": "Look at the totals."}),
        ("list_reminders", {}),
        ("notify", {"message": "The totals are ready."}),
        ("manage_pulse", {"action": "get_config"}),
        ("create_skill", {"name": "csv-tips", "description": "Reading CSV files.", "content": "Use pandas.read_csv."}),
        (
            "render_blocks",
            {
                "blocks": [
                    {"type": "markdown", "content": "**Totals**"},
                    {"type": "table", "variable": "totals"},
                    CHART,
                ]
            },
        ),
        ("ask_user", {"question": "Which region next?", "options": ["North", "South"]}),
        ("send_message", {"text": "Totals are ready."}),
        ("fetch_url", {"url": page_url}),
        (
            "create_ui_component",
            {
                "name": "counter",
                "description": "A counter.",
                "html": "<button id='add'>+1</button>",
                "js": "add.onclick = () => ak.setState({count: ak.state.count + 1});",
                "state": {"count": 0},
            },
        ),
        (
            "create_tool",
            {
                "name": "double_it",
                "description": "Double a number.",
                "writes": False,
                "parameter_schema": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
                "code": "return args['x'] * 2",
            },
        ),
        ("create_library", {"name": "regions", "description": "Region names.", "code": "NAMES = ['North', 'South']\n"}),
        ("llm_generate", {"prompt": SIDE_PROMPT + " the word 'North'", "max_tokens": 20}),
        ("spawn_session", {"task": SUBTASK + ": count the regions and report the number."}),
    ]


def second_steps(body: dict[str, Any]) -> Step:
    task = _field(body, "create_scheduled_task", "id")
    reminder = _field(body, "set_reminder", "id")
    session = _field(body, "spawn_session", "id")
    return [
        ("wait_for_sessions", {"ids": [session]}),
        ("disable_scheduled_task", {"id": task}),
        ("enable_scheduled_task", {"id": task}),
        # After the page this session fetched: the change keeps the task disabled for review.
        ("update_scheduled_task", {"id": task, "cron": "0 4 * * *"}),
        ("cancel_scheduled_task", {"id": task}),
        ("cancel_reminder", {"id": reminder}),
        ("update_skill", {"name": "csv-tips", "content": "Use pandas.read_csv with parse_dates."}),
        ("read_skill", {"name": "csv-tips"}),
        ("list_skills", {}),
        ("disable_skill", {"name": "csv-tips"}),
        ("enable_skill", {"name": "csv-tips"}),
        ("double_it", {"x": 21}),
        ("update_tool", {"name": "double_it", "code": "return args['x'] * 2.0"}),
        ("read_tool", {"name": "double_it"}),
        ("list_tools", {}),
        ("disable_tool", {"name": "double_it"}),
        ("enable_tool", {"name": "double_it"}),
        ("update_library", {"name": "regions", "code": "NAMES = ['North', 'South', 'West']\n"}),
        ("read_library", {"name": "regions"}),
        ("list_libraries", {}),
        ("update_ui_component", {"name": "counter", "css": "button { margin: 4px; }"}),
        ("read_ui_component", {"name": "counter", "version": 1}),
        ("list_ui_components", {}),
        ("render_and_wait", {"component": "counter"}),
    ]


def last_steps(body: dict[str, Any]) -> Step:
    return [
        ("delete_skill", {"name": "csv-tips"}),
        ("delete_tool", {"name": "double_it"}),
        ("delete_library", {"name": "regions"}),
        ("delete_ui_component", {"name": "counter"}),
    ]


def mcp_steps(body: dict[str, Any]) -> Step:
    return [("time__get_current_time", {"timezone": "UTC"})]


def _results(body: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    """The results in ``body``, by the name of the tool that gave each."""
    names = {}
    for message in body["messages"]:
        if message["role"] == "assistant" and isinstance(message["content"], list):
            names.update({b["id"]: b["name"] for b in message["content"] if b.get("type") == "tool_use"})
    found = {}
    for message in body["messages"]:
        if message["role"] == "user" and isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    found[names[block["tool_use_id"]]] = (bool(block.get("is_error")), _text(block["content"]))
    return found


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def _field(body: dict[str, Any], tool: str, key: str) -> str:
    """``key`` of the JSON result of ``tool``, else the first id-like word in its text."""
    _, text = _results(body).get(tool, (True, ""))
    try:
        value = json.loads(text)
        if isinstance(value, dict) and key in value:
            return str(value[key])
    except ValueError:
        pass
    match = re.search(r"\b([0-9a-f]{6,}(?:-[0-9a-f]+)*)\b", text)
    return match.group(1) if match else "unknown"


def _opening(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else [b["text"] for b in content if b.get("type") == "text"][-1]


def responder(mcp: bool, page_url: str) -> Callable[[dict[str, Any]], Any]:
    from agent_kernel.testing import call, reply, say, tool_use

    plan: list[Any] = [mcp_steps] if mcp else [lambda body: first_steps(page_url), second_steps, last_steps]

    def respond(body: dict[str, Any]) -> Any:
        opening = _opening(body)
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if SIDE_PROMPT in opening:
            return say("North")
        if SUBTASK in opening:
            return call("report_result", result="2 regions") if step == 0 else say("reported")
        if step < len(plan):
            return reply(*[tool_use(name, tool_input) for name, tool_input in plan[step](body)])
        return say("Every tool was called.")

    return respond


PAGE = b"<html><head><title>Regions</title></head><body><h1>Regions</h1><p>North and South.</p></body></html>"


class _Page(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - a notification (the default target's webhook)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: Any) -> None:
        pass


def serve_page() -> str:
    """A page on 127.0.0.1 for fetch_url (which the agent is allowed to reach here)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/regions"


def granted_tools(page_url: str) -> list[str]:
    """Every tool the check calls after fetch_url's page: the session has read untrusted
    content then, and nobody is present to approve, so the person grants them in advance
    as a scheduled job's standing grants do (AGENT_KERNEL_GRANTS)."""
    steps = first_steps(page_url)
    after = [name for name, _ in steps[[n for n, _ in steps].index("fetch_url") + 1 :]]
    body: dict[str, Any] = {"messages": []}
    later = [*second_steps(body), *last_steps(body)]
    return sorted({*after, *(name for name, _ in later)})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", type=Path, required=True, help="where the JSON report goes")
    parser.add_argument("--mcp-only", metavar="COMMAND", help="call only get_current_time of the MCP server COMMAND")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="agent-kernel-install-"))
    os.environ.update({"AGENT_KERNEL_HOME": str(home), "ANTHROPIC_API_KEY": "scripted-install-check"})
    os.chdir(home)

    from agent_kernel import Agent
    from agent_kernel.config import TOOL_GROUPS
    from agent_kernel.testing import ScriptedModel

    page_url = serve_page()
    os.environ["AGENT_KERNEL_GRANTS"] = json.dumps({"after_untrusted": granted_tools(page_url)})
    from agent_kernel.scheduler.notify import Targets

    Targets(home).add(page_url.replace("http://", "json://").replace("/regions", "/notify"), name="me", default=True)
    model = ScriptedModel(responder=responder(bool(args.mcp_only), page_url))
    settings: dict[str, Any] = {
        # The browser group needs the `browser` extra (Playwright) and Chromium, which the
        # wheel alone does not bring: tests/tools/test_browser.py covers it.
        "tool_groups": [g for g in TOOL_GROUPS if g != "browser"], "db_path": str(home / "agent.duckdb"), "fetch_allow": ["127.0.0.1"],
    }  # fmt: skip
    if args.mcp_only:
        settings |= {"mcp_servers": {"time": {"command": args.mcp_only}}, "mcp_timeout": 60.0}
    agent = Agent(http_client=model.http_client, **settings)
    result = agent.run(MARKER + ": call every tool once.")
    called: dict[str, tuple[bool, str]] = {}
    for body in model.requests:
        called |= _results(body)
    offered = sorted({t["name"] for body in model.requests for t in body.get("tools", [])})
    report = {
        "text": result.text,
        "failed": bool(result.failed),
        "error": result.error,
        "offered": offered,
        "called": {name: {"is_error": e, "text": text[:600]} for name, (e, text) in sorted(called.items())},
        "totals": str(agent.shell.user_ns.get("totals")),
    }
    args.report.write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
