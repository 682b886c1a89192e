"""The offline demo model: answers every kind of request the agent and JupyterLab send, without Claude.

It reads a request like a (very small) agent would and answers from rules, never from
knowledge, and every answer that a person reads says it came from this offline model:

- an ``%agent`` turn or a chat prompt naming a ``.csv`` file gets a ``run_code`` call that
  loads it and prints monthly totals, then a summary of what the code printed; asked for a
  chart afterwards, it draws those totals as bars with ``render_blocks``;
- "Fix with agent" (the panel's fix prompt with a cell and its traceback attached) gets a
  ``replace_cell`` call when the error is a misspelt name that the cell spells right
  elsewhere, else an explanation of the error;
- "Explain" (an attached error) gets what that kind of error means and the error's line;
- the server's inline completion gets a short continuation of a few common lines (an
  import, a DataFrame's method, a loop header), or nothing;
- "Explain" on a failed scheduled run gets the failing cell and error the comparison shows;
- anything else gets an honest note of what this model can do.

Requests are recognised by their shapes only (system prompts' openings, the chat's
prompts and attachment headings), as the Messages API would see them.
"""

from __future__ import annotations

import difflib
import json
import re

from agent_kernel.model.conversation import is_turn_context
from agent_kernel.model.shapes import Block, MessageParam, ToolResultBlock
from agent_kernel.testing.script import Reply, text, tool_use
from agent_kernel.testing.wire import MessagesRequest

#: The model id every answer reports (the ``%agent`` footer and the chat show it).
OFFLINE_MODEL = "scripted-offline"

OFFLINE_NOTE = (
    "This is the offline scripted demo model, not Claude: it loads a CSV and totals it by month, charts the totals, "
    "fixes a misspelt name, explains an error and completes a few common lines. "
    "Set ANTHROPIC_API_KEY to work with Claude."
)

# The openings of the side calls' system prompts (agent_kernel.server.completion.SYSTEM_PROMPT,
# agent_kernel.scheduler.explain.SYSTEM); tests/testing/test_demo.py checks they still match.
COMPLETION_SYSTEM_STARTS = "You complete code in a Jupyter notebook"
RUN_EXPLAIN_SYSTEM_STARTS = "You explain why a scheduled Jupyter notebook run failed"
# The panel's prompts (labextension/src/chatcommands.ts FIX_PROMPT, EXPLAIN_PROMPT).
FIX_STARTS = "Fix the error in the attached cell"
EXPLAIN_STARTS = "Explain the attached error"

CURSOR = "<CURSOR>"
_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning))\s*:?\s*(.*)$", re.M)
_ERROR_ANYWHERE = re.compile(r"\b([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))\s*:\s*(.*)$", re.M)
_ATTACHED = re.compile(r"^Attached by the person \((\w+)(?::\s*(.*))?\):\n", re.S)
_CELL_ID = re.compile(r"\(id ([\w-]+)\)\s*$")

_MEANINGS = {
    "NameError": "Python met a name that nothing in the kernel defines: a typo, or a cell above not run yet",
    "ZeroDivisionError": "a number was divided by zero",
    "KeyError": "a dict or DataFrame was asked for a key or column it does not have",
    "IndexError": "a list or array was indexed past its end",
    "TypeError": "an operation got a value of a type it cannot use (for example a str where a number goes)",
    "ValueError": "a function got a value of the right type but not one it accepts",
    "AttributeError": "an object was asked for an attribute or method it does not have",
    "ModuleNotFoundError": "the import names a package that is not installed in this kernel's environment",
    "ImportError": "the import found the package but not the name asked for",
    "FileNotFoundError": "the path names no file, relative to the notebook's working directory",
    "SyntaxError": "the cell is not valid Python, so none of it ran",
    "IndentationError": "the cell's indentation is inconsistent, so none of it ran",
}

# Inline completion: what follows a line's end (the cursor at the line's end).
_IMPORTS = {"numpy": "np", "pandas": "pd", "matplotlib.pyplot": "plt", "seaborn": "sns", "altair": "alt"}


def demo_responder(request: MessagesRequest) -> Reply:
    """A reply to ``request`` (a Messages API request body)."""
    system = _system_text(request)
    if system.startswith(COMPLETION_SYSTEM_STARTS):
        return _answer(complete(_all_text(request["messages"][-1])))
    if system.startswith(RUN_EXPLAIN_SYSTEM_STARTS):
        return _answer(explain_run(_all_text(request["messages"][-1])))
    last = request["messages"][-1]
    blocks = _blocks(last)
    results = [b for b in blocks if b["type"] == "tool_result"]
    if results:
        return _after_tool(results[-1], _tool_name(request, results[-1].get("tool_use_id")))
    words = [b.get("text", "") for b in blocks if b["type"] == "text" and not is_turn_context(b)]
    prompt = " ".join(w for w in words if not _ATTACHED.match(w))
    attached = [m for m in (_attachment(w) for w in words) if m is not None]
    if prompt.lstrip().startswith(FIX_STARTS):
        return _fix(attached)
    if prompt.lstrip().startswith(EXPLAIN_STARTS):
        return _answer(_explain_error(attached))
    csv = re.search(r"([\w./-]+\.csv)\b", prompt)
    if csv is None and re.search(r"\b(chart|plot|graph|visuali[sz]e)", prompt, re.I):
        return _chart(request)
    if csv is None:
        asked = " ".join(prompt.split())[:200]
        return _answer(f"You asked: “{asked}”.\n\n{OFFLINE_NOTE}" if asked else OFFLINE_NOTE)
    return _load_csv(prompt, csv.group(1))


def _answer(value: str) -> Reply:
    return Reply([text(value)], model=OFFLINE_MODEL)


def _call(name: str, **tool_input: object) -> Reply:
    return Reply([tool_use(name, tool_input)], model=OFFLINE_MODEL)


def _system_text(request: MessagesRequest) -> str:
    system = request.get("system") or ""
    if isinstance(system, list):
        return "".join(b.get("text", "") for b in system if isinstance(b, dict))
    return str(system)


def _blocks(message: MessageParam) -> list[Block]:
    content = message["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _all_text(message: MessageParam) -> str:
    return "\n".join(b.get("text", "") for b in _blocks(message) if b["type"] == "text")


def _tool_name(request: MessagesRequest, tool_use_id: object) -> str:
    """The name of the tool the model called with ``tool_use_id`` (from its earlier message)."""
    for message in reversed(request["messages"]):
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_use" and block.get("id") == tool_use_id:
                    return str(block.get("name", ""))
    return ""


def _attachment(block_text: str) -> tuple[str, str, str] | None:
    """``(kind, label, text)`` of an attachment block the chat sent, else None."""
    found = _ATTACHED.match(block_text)
    if found is None:
        return None
    return found.group(1), (found.group(2) or "").strip(), block_text[found.end() :]


# -- an %agent turn or a chat prompt --------------------------------------------------------------


def _load_csv(prompt: str, path: str) -> Reply:
    named = re.search(r"\b(?:called|named)\s+`?([A-Za-z_]\w*)`?", prompt)
    name = named.group(1) if named else re.sub(r"\W", "_", path.rsplit("/", 1)[-1][:-4]) or "data"
    code = (
        "import pandas as pd\n"
        f"{name} = pd.read_csv({path!r}, parse_dates=['date'])\n"
        f"monthly = {name}.groupby({name}['date'].dt.to_period('M'))['revenue'].sum()\n"
        "print(monthly.to_string())"
    )
    return _call("run_code", code=code)


_TOTAL_LINE = re.compile(r"^\s*(\d{4}-\d{2})\s+(-?\d+(?:\.\d+)?)\s*$", re.M)


def _chart(request: MessagesRequest) -> Reply:
    """A bar chart of the monthly totals an earlier ``run_code`` of the session printed."""
    for message in reversed(request["messages"]):
        for block in _blocks(message):
            if block.get("type") != "tool_result":
                continue
            content = block.get("content")
            if isinstance(content, list):
                content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
            try:
                stdout = json.loads(content).get("stdout", "") if isinstance(content, str) else ""
            except (ValueError, AttributeError):
                continue
            totals = _TOTAL_LINE.findall(str(stdout))
            if totals:
                chart = {
                    "type": "chart",
                    "chartType": "bar",
                    "title": "Monthly revenue",
                    "xLabel": "month",
                    "yLabel": "revenue",
                    "data": {
                        "labels": [month for month, _ in totals],
                        "datasets": [{"label": "revenue", "data": [float(value) for _, value in totals]}],
                    },
                }
                return _call("render_blocks", title="Monthly revenue", blocks=[chart])
    return _answer(
        f"There are no monthly totals in this session to chart yet: ask me to load a CSV first.\n\n{OFFLINE_NOTE}"
    )


def _after_tool(result: ToolResultBlock, tool: str) -> Reply:
    content = result.get("content")
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b["type"] == "text")
    try:
        outcome = json.loads(content) if isinstance(content, str) else {}
    except ValueError:
        outcome = {}
    if not isinstance(outcome, dict):
        outcome = {}
    if result.get("is_error"):
        return _answer(f"The {tool or 'tool'} call did not work: {str(content)[:300]}\n\n_{OFFLINE_NOTE}_")
    if tool == "render_blocks":
        return _answer(
            "The chart above shows the monthly revenue totals from the earlier turn; hover a bar for its value.\n\n"
            f"_{OFFLINE_NOTE}_"
        )
    if tool == "replace_cell":
        cell = outcome.get("replaced", "the cell")
        return _answer(
            f"I replaced the source of cell `{cell}` with the corrected name; it runs again once this turn "
            f"ends, so its new output shows whether the fix worked.\n\n_{OFFLINE_NOTE}_"
        )
    if not outcome.get("success"):
        error = outcome.get("error") or {}
        return _answer(f"The code failed ({error.get('type', 'error')}: {error.get('message', content)}).")
    table = str(outcome.get("stdout", "")).strip()
    return _answer(
        "Here are the monthly revenue totals:\n\n"
        f"```\n{table}\n```\n\n"
        "The data is in your kernel as a DataFrame, and `monthly` holds the totals.\n\n"
        f"_{OFFLINE_NOTE}_"
    )


# -- Fix and Explain on a cell's error -----------------------------------------------------------


def _error_of(attached: list[tuple[str, str, str]]) -> tuple[str, str] | None:
    """The last ``(type, message)`` line of the attached traceback(s)."""
    for kind, _, body in reversed(attached):
        if kind in ("error", "output"):
            found = _ERROR_LINE.findall(body)
            if found:
                name, message = found[-1]
                return name.rsplit(".", 1)[-1], message.strip()
    return None


def _explain_error(attached: list[tuple[str, str, str]], also: str = "") -> str:
    error = _error_of(attached)
    if error is None:
        return f"I see no error attached: attach one with Explain under a failed cell's output.\n\n_{OFFLINE_NOTE}_"
    name, message = error
    meaning = _MEANINGS.get(name, "the code raised an exception that this offline model has no note for")
    return (
        f"The cell raised **{name}**{': ' + message if message else ''}.\n\n"
        f"A {name} means {meaning}. The last lines of the traceback show the line that raised it.\n\n"
        f"{also}_{OFFLINE_NOTE}_"
    )


def _fix(attached: list[tuple[str, str, str]]) -> Reply:
    cell = next(((label, body) for kind, label, body in attached if kind == "cell"), None)
    error = _error_of(attached)
    if cell is None or error is None:
        return _answer(f"Attach a failed cell and its error (Fix with agent does both).\n\n_{OFFLINE_NOTE}_")
    label, source = cell
    cell_id = _CELL_ID.search(label)
    fixed = fix_source(source, *error)
    if cell_id is None or fixed is None:
        return _answer(
            _explain_error(attached, "The offline model fixes only misspelt names, so this one is yours.\n\n")
        )
    return Reply(
        [
            text(f"The cell raised {error[0]}: {error[1]}. It is a misspelt name; here is the cell with it corrected."),
            tool_use("replace_cell", {"cell": cell_id.group(1), "source": fixed, "run": True}),
        ],
        model=OFFLINE_MODEL,
    )


def fix_source(source: str, error: str, message: str) -> str | None:
    """``source`` with a misspelt name replaced by the nearest name the cell spells, or None."""
    found = re.search(r"name '([A-Za-z_]\w*)' is not defined", message)
    if error != "NameError" or found is None:
        return None
    wrong = found.group(1)
    names = sorted({n for n in re.findall(r"\b[A-Za-z_]\w*\b", source) if n != wrong})
    close = difflib.get_close_matches(wrong, names, n=1, cutoff=0.75)
    if not close:
        return None
    return re.sub(rf"\b{re.escape(wrong)}\b", close[0], source)


# -- inline completion and a failed run's explanation -------------------------------------------


def complete(prompt: str) -> str:
    """The text to insert at the cursor of a completion request's current cell, or ''."""
    current = prompt.rsplit("<current_cell", 1)[-1]
    if CURSOR not in current:
        return ""
    before = current.split(CURSOR, 1)[0]
    line = before.rsplit("\n", 1)[-1]
    stripped = line.strip()
    imported = re.fullmatch(r"import ([\w.]*)", stripped)
    if imported:
        typed = imported.group(1)
        for module, alias in _IMPORTS.items():
            if typed and module.startswith(typed):
                return f"{module[len(typed) :]} as {alias}"
        return ""
    if re.fullmatch(r"[A-Za-z_]\w*\.", stripped):
        return "head()"
    if re.fullmatch(r"for \w+ in", stripped):
        return " range(10):"
    if re.fullmatch(r"def ([A-Za-z_]\w*)\(", stripped):
        return "):\n    ..."
    return ""


def explain_run(prompt: str) -> str:
    """An explanation of a failed scheduled run from the comparison's text."""
    errors = _ERROR_LINE.findall(prompt) or _ERROR_ANYWHERE.findall(prompt)
    cell = re.search(r"\bcell (\d+)", prompt)
    where = f" in cell {cell.group(1)}" if cell else ""
    if not errors:
        return (
            "The comparison shows no error line, so the cause is not in it: open the run's "
            f"output notebook and its log.\n\n{OFFLINE_NOTE}"
        )
    name, message = errors[-1]
    name = name.rsplit(".", 1)[-1]
    meaning = _MEANINGS.get(name, "an exception this offline model has no note for")
    return (
        f"The run stopped{where} with {name}{': ' + message.strip() if message.strip() else ''}. "
        f"A {name} means {meaning}. Check that cell against the last successful run.\n\n{OFFLINE_NOTE}"
    )
