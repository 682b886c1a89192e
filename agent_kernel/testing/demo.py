"""The offline demo model: answers the quickstart's kind of request without Claude.

It reads the request like a (very small) agent would: a prompt naming a ``.csv`` file gets
a ``run_code`` call that loads it and prints monthly totals; a tool result gets a summary
of what the code printed; anything else gets an honest note that this is not Claude.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_kernel.model.conversation import is_turn_context
from agent_kernel.testing.script import Reply, call, say

OFFLINE_NOTE = (
    "This is the offline scripted demo model, not Claude: it only knows how to load a CSV "
    "and total it by month. Set ANTHROPIC_API_KEY to work with Claude."
)


def demo_responder(request: dict[str, Any]) -> Reply:
    """A reply to ``request`` (a Messages API request body)."""
    last = request["messages"][-1]
    blocks = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        return _summarise(results[-1])
    prompt = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text" and not is_turn_context(b))
    csv = re.search(r"([\w./-]+\.csv)\b", prompt)
    if csv is None:
        return say(OFFLINE_NOTE)
    path = csv.group(1)
    named = re.search(r"\b(?:called|named)\s+`?([A-Za-z_]\w*)`?", prompt)
    name = named.group(1) if named else re.sub(r"\W", "_", path.rsplit("/", 1)[-1][:-4]) or "data"
    code = (
        "import pandas as pd\n"
        f"{name} = pd.read_csv({path!r}, parse_dates=['date'])\n"
        f"monthly = {name}.groupby({name}['date'].dt.to_period('M'))['revenue'].sum()\n"
        "print(monthly.to_string())"
    )
    return call("run_code", code=code)


def _summarise(result: dict[str, Any]) -> Reply:
    content = result.get("content")
    try:
        outcome = json.loads(content) if isinstance(content, str) else {}
    except ValueError:
        outcome = {}
    if result.get("is_error") or not outcome.get("success"):
        error = outcome.get("error") or {}
        return say(f"The code failed ({error.get('type', 'error')}: {error.get('message', content)}).")
    table = outcome.get("stdout", "").strip()
    return say(
        "Here are the monthly revenue totals:\n\n"
        f"```\n{table}\n```\n\n"
        "The data is in your kernel as a DataFrame, and `monthly` holds the totals.\n\n"
        f"_{OFFLINE_NOTE}_"
    )
