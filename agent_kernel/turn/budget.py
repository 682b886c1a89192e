"""The context budget: every request stays under ``compact_at × context_window`` tokens.

The store keeps every message; what a request *sends* is a view of them
(:func:`render`): a stored summary in place of the oldest messages, old large tool
results shortened, the rest verbatim. Before each request the view's size is estimated
without an API call: the input tokens the API reported for the previous request, plus
about a token per four characters of what was added since (everything by characters when
there is no previous report). Past the threshold the conversation is compacted:

1. images in tool results older than the last exchanges are sent as a one-line
   placeholder saying what was there (an image costs as much as a few thousand characters);
2. when that is not enough, those tool results are also shortened to their head and tail,
   with the ``execution_id`` / ``tool_use_id`` that finds the full text in the store;
3. when that is not enough either, the oldest part is summarised by ``small_model`` into one
   block, so the request comes down to about half the threshold (the oldest half is
   summarised at 70%). The cut falls where no ``tool_use`` loses its ``tool_result``.

A compaction is stored (:mod:`agent_kernel.store.compactions`) and every later request,
turn and kernel of the session sends the same view, so the request's prefix stays the same
(cacheable) until the next compaction.

With ``compaction = "server"`` none of this happens here: each request asks the API to
compact (its beta ``context_management`` edit ``compact_20260112``).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from agent_kernel.errors import ModelError
from agent_kernel.model import images
from agent_kernel.model.conversation import Message, is_turn_context
from agent_kernel.model.shapes import ContentBlock, RequestParams, TextBlock, ToolResultBlock
from agent_kernel.model.tool_search import prompt_tools
from agent_kernel.store.compactions import Compaction, load, save

if TYPE_CHECKING:
    from anthropic.types import Message as APIMessage

    from agent_kernel.config import AgentKernel
    from agent_kernel.model.client import ModelClient, StreamView
    from agent_kernel.store import Store

__all__ = ["ContextBudget", "context_window_for", "is_summary_request", "render"]


DEFAULT_CONTEXT_WINDOW = 200_000
# Models whose window is not the default (name prefixes; the first match wins).
CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("claude-2.0", 100_000),
    ("claude-instant", 100_000),
)

KEEP_LAST_MESSAGES = 4  # the last two exchanges (a call and its results) stay verbatim
TARGET_SHARE = 0.5  # a compaction brings the request to about this share of the threshold
TRIM_OVER_CHARS = 2_000  # tool results longer than this are shortened when old
TRIM_HEAD_CHARS = 700
TRIM_TAIL_CHARS = 300
SUMMARY_INPUT_CHARS = 400_000  # most text one summary request carries (about 100k tokens)
SUMMARY_PIECE_CHARS = 1_200  # most characters of one tool input or result in that text

SERVER_BETA = "compact-2026-01-12"
SERVER_EDIT = "compact_20260112"

SUMMARY_SYSTEM = (
    "You summarise the earlier part of a conversation between a user and an AI agent that "
    "works in the user's live Jupyter kernel, so the agent can go on without it. Write plain "
    "prose and short lists: what the user wants, decisions made, facts and results found "
    "(numbers, names of variables, DataFrames, files and tables), what is defined in the "
    "kernel, open questions and what was asked last. Keep execution ids of results worth "
    "reading again. Leave out greetings and anything the agent will not need."
)


def context_window_for(model: str, configured: int = 0) -> int:
    """The context window of ``model`` in tokens (``configured`` when it is not 0)."""
    if configured:
        return configured
    for prefix, window in CONTEXT_WINDOWS:
        if model.startswith(prefix):
            return window
    return DEFAULT_CONTEXT_WINDOW


def is_summary_request(body: Mapping[str, object]) -> bool:
    """Whether a Messages request body is a compaction's summary request."""
    system = body.get("system")
    return isinstance(system, str) and system.startswith(SUMMARY_SYSTEM[:80])


def chars(value: object) -> int:
    """The size the budget counts: characters of the JSON the SDK sends, each image
    counted as the characters its tokens stand for (:func:`agent_kernel.model.images.sent_chars`)."""
    return images.sent_chars(value)


def tokens(n_chars: int) -> int:
    """About a token per four characters."""
    return -(-n_chars // 4)


# -- what a request sends ----------------------------------------------------------------


def render(messages: list[Message], state: Compaction) -> list[Message]:
    """The messages a request sends for ``messages`` under ``state``.

    The summary (when there is one) opens the conversation as a user message; when the
    first kept message is a user prompt the two are one message. Images before
    ``state.unimaged`` are placeholders; tool results before ``state.trimmed`` are shortened. A compaction block the API returned (server mode)
    is sent as text, which every endpoint accepts.
    """
    kept = messages[state.covers :]
    sent = [_sent(m, i < state.trimmed, i < state.unimaged) for i, m in enumerate(kept, state.covers)]
    if state.summary is None:
        return sent
    opening = _summary_block(state)
    if sent and sent[0]["role"] == "user":
        return [{"role": "user", "content": [opening, *sent[0]["content"]]}, *sent[1:]]
    return [{"role": "user", "content": [opening]}, *sent]


def _summary_block(state: Compaction) -> TextBlock:
    return {
        "type": "text",
        "text": (
            f'<conversation-summary covers="the first {state.covers} messages">\n'
            f"{state.summary}\n</conversation-summary>\n"
            "(The conversation before this point was summarised to fit the context window; "
            "its messages are in the table `messages` of this session.)"
        ),
    }


def _sent(message: Message, trim: bool, unimage: bool = False) -> Message:
    content = message["content"]
    if isinstance(content, str):
        return message
    changed = False
    blocks: list[ContentBlock] = []
    for block in content:
        if block["type"] == "compaction":
            block = {"type": "text", "text": f"(Summary of the earlier conversation) {block.get('content') or ''}"}
            changed = True
        elif trim and block["type"] == "tool_result":
            short = trim_result(block)
            changed = changed or short is not block
            block = short
        elif unimage and block["type"] == "tool_result":
            plain = without_images(block)
            changed = changed or plain is not block
            block = plain
        blocks.append(block)
    return {"role": message["role"], "content": blocks} if changed else message


_EXECUTION_ID = re.compile(r'"execution_id":\s*"([0-9a-f]+)"')


def without_images(block: ToolResultBlock) -> ToolResultBlock:
    """``block`` (a tool_result) with each image replaced by a one-line placeholder."""
    content = block.get("content")
    if isinstance(content, list) and any(images.is_image(b) for b in content):
        placeholder = "an image the tool returned"
        return {**block, "content": [images.placeholder(b, placeholder) if images.is_image(b) else b for b in content]}
    return block


def trim_result(block: ToolResultBlock) -> ToolResultBlock:
    """``block`` (a tool_result) without images, a long text content cut to its head and tail."""
    block = without_images(block)
    content = block.get("content")
    if isinstance(content, list):
        if all(b.get("type") == "text" for b in content):
            content = "\n".join(str(b.get("text", "")) for b in content)
        else:
            return block  # images and documents are left alone
    if not isinstance(content, str) or len(content) <= TRIM_OVER_CHARS:
        return block
    found = _EXECUTION_ID.search(content)
    where = f"tool_use_id {block.get('tool_use_id')!r} in table messages"
    if found:
        where = f"code_executions.id = {found.group(1)!r} (stdout, stderr), or " + where
    cut = len(content) - TRIM_HEAD_CHARS - TRIM_TAIL_CHARS
    middle = f"\n[... {cut:,} characters trimmed to save context; the full result is stored: {where} ...]\n"
    short: ToolResultBlock = {**block, "content": content[:TRIM_HEAD_CHARS] + middle + content[-TRIM_TAIL_CHARS:]}
    return short


def _sizes(messages: list[Message], state: Compaction) -> list[int]:
    """The size of each message as ``state`` sends it (0 for those its summary covers)."""
    return [0] * state.covers + [
        chars(_sent(m, i < state.trimmed, i < state.unimaged))
        for i, m in enumerate(messages[state.covers :], state.covers)
    ]


def cuttable(messages: list[Message], index: int) -> bool:
    """Whether the kept part may start at ``index``: no tool_use there loses its result."""
    message = messages[index]
    if message["role"] == "assistant":
        return True  # the results before it answer calls that are summarised with them
    content = message["content"]
    return isinstance(content, str) or not any(b.get("type") == "tool_result" for b in content)


def fingerprint(messages: list[Message], covers: int) -> str:
    """What identifies the last message a summary covers."""
    if covers == 0:
        return ""
    last = messages[covers - 1]
    content = last["content"]
    if not isinstance(content, str):
        content = [b for b in content if not (b.get("type") == "text" and not str(b.get("text", "")).strip())]
    data = json.dumps([covers, last["role"], content], sort_keys=True, default=str)
    return hashlib.sha256(data.encode("utf-8", "replace")).hexdigest()[:16]


def applicable(stored: list[Compaction], messages: list[Message]) -> Compaction:
    """The newest of the ``stored`` compactions made from this conversation (none: send it all)."""
    for row in stored:
        fits = row.covers < len(messages) and max(row.trimmed, row.unimaged) <= len(messages)
        if fits and row.fingerprint == fingerprint(messages, row.covers):
            return row
    return Compaction()


# -- the budget of one turn ----------------------------------------------------------------


@dataclass
class Observed:
    """The previous request of a session as sent, and its size as the API reported it."""

    sent: list[Message]
    sent_chars: int  # of the messages
    overhead_chars: int  # of the system prompt and tool definitions
    state: Compaction
    input_tokens: int | None = None


class ContextBudget:
    """Fits each request of a turn into the budget (see the module's docstring).

    ``seen`` outlives the turn (the :class:`~agent_kernel.turn.agent.Agent` keeps it): the last
    request and its reported size per session, so the next turn's first estimate starts
    from the API's count too. ``mirrored``: the caller keeps the session's compactions in
    memory and adds :attr:`compactions` to them after the turn, so saving one is a mirrored
    write (see :meth:`agent_kernel.store.Store.connect`) and the next turn need not read
    the store again for it.
    """

    def __init__(
        self,
        *,
        window: int,
        compact_at: float,
        mode: str,
        small_model: str,
        store: Store,
        session_id: str,
        model_client: ModelClient,
        seen: dict[str, Observed] | None = None,
        stored: list[Compaction] | None = None,
        mirrored: bool = False,
    ) -> None:
        self.window = window
        self.limit = int(window * compact_at)
        self.mode = mode
        self.small_model = small_model
        self.store = store
        self.session_id = session_id
        self.model_client = model_client
        self.seen = seen if seen is not None else {}
        self.stored = stored  # the session's compactions, newest first (None: read them)
        self.mirrored = mirrored
        self.state: Compaction | None = None
        # Told of each summary call (its response and milliseconds), so the turn records
        # its usage and cost like any model call.
        self.on_model_call: Callable[[APIMessage, float], None] | None = None
        self.compactions: list[Compaction] = []  # made during this turn
        self._pending: Observed | None = None
        self._overhead: tuple[object, object, int] | None = None  # system, tools, their characters

    @classmethod
    def from_settings(
        cls,
        config: AgentKernel,
        *,
        model: str,
        store: Store,
        session_id: str,
        model_client: ModelClient,
        seen: dict[str, Observed] | None = None,
        stored: list[Compaction] | None = None,
        mirrored: bool = False,
    ) -> ContextBudget:
        return cls(
            window=context_window_for(model, config.context_window),
            compact_at=config.compact_at,
            mode=config.compaction,
            small_model=config.small_model,
            store=store,
            session_id=session_id,
            model_client=model_client,
            seen=seen,
            stored=stored,
            mirrored=mirrored,
        )

    # -- before and after each request ---------------------------------------------------

    async def fit(self, params: RequestParams, view: StreamView) -> RequestParams:
        """``params`` with the messages this request sends (compacted first when needed)."""
        if self.mode == "server":
            edit = {"type": SERVER_EDIT, "trigger": {"type": "input_tokens", "value": self.limit}}
            return {**params, "betas": [SERVER_BETA], "context_management": {"edits": [edit]}}
        messages = params["messages"]
        if self.state is None:
            if self.stored is None:
                self.stored = await asyncio.to_thread(self._load)
            self.state = applicable(self.stored, messages)
        overhead = self._overhead_chars(params.get("system"), params.get("tools"))
        sent = render(messages, self.state)
        estimate, sent_chars = self.estimate(sent, overhead)
        if estimate > self.limit:
            sent = await self._compact(messages, estimate, sent_chars, view)
            sent_chars = chars(sent)
        self._pending = Observed(sent, sent_chars, overhead, self.state)
        return {**params, "messages": sent}

    def _overhead_chars(
        self, system: str | list[TextBlock] | None, tools: Sequence[Mapping[str, object]] | None
    ) -> int:
        """Characters of the system prompt and tool definitions, counted again only when
        the turn sends other objects (it sends the same ones while nothing changed)."""
        kept = self._overhead
        if kept is None or kept[0] is not system or kept[1] is not tools:
            kept = self._overhead = (system, tools, chars(system) + chars(prompt_tools(tools)))
        return kept[2]

    def request_chars(self) -> int | None:
        """The characters of the request :meth:`fit` just made, as
        :func:`~agent_kernel.model.usage.request_chars` counts them (without sizing the whole
        conversation again); ``None`` when it did not count them (``compaction = 'server'``)."""
        pending = self._pending
        return None if pending is None else pending.sent_chars + pending.overhead_chars

    def observe(self, message: APIMessage, view: StreamView) -> None:
        """Note the input tokens the API reported for the request just made."""
        usage = message.usage
        reported = (
            (usage.input_tokens or 0)
            + (getattr(usage, "cache_read_input_tokens", 0) or 0)
            + (getattr(usage, "cache_creation_input_tokens", 0) or 0)
        )
        if self._pending is not None:
            self._pending.input_tokens = reported
            self.seen[self.session_id] = self._pending
            self._pending = None
        if any(getattr(b, "type", None) == "compaction" for b in message.content):
            view.notice(
                "The API compacted the context (compaction = 'server'); the full history "
                "stays in the store (%agent_history).",
                kind="muted",
            )

    def estimate(self, sent: list[Message], overhead_chars: int) -> tuple[int, int]:
        """Input tokens of a request sending ``sent``, and the characters of ``sent``.

        From the last request's reported tokens plus what was added since, when ``sent``
        continues that request; never less than the characters' estimate (a count that
        leaves something out, such as the tool definitions, must not let a request past
        the budget).
        """
        last = self.seen.get(self.session_id)
        n = len(last.sent) if last is not None else 0
        if (
            last is not None
            and last.input_tokens is not None
            and last.state == self.state
            and 0 < n <= len(sent)
            and sent[n - 1] == last.sent[-1]
            and sent[0] == last.sent[0]
        ):
            added = chars(sent[n:])
            sent_chars = last.sent_chars + added
            reported = last.input_tokens + tokens(max(added + overhead_chars - last.overhead_chars, 0))
            return max(reported, tokens(sent_chars + overhead_chars)), sent_chars
        sent_chars = chars(sent)
        return tokens(sent_chars + overhead_chars), sent_chars

    # -- compacting ----------------------------------------------------------------------

    def _load(self) -> list[Compaction]:
        with self.store.connect() as con:
            return load(con, self.session_id)

    async def _compact(
        self, messages: list[Message], estimate: int, sent_chars: int, view: StreamView
    ) -> list[Message]:
        started = time.perf_counter()
        state = self.state or Compaction()
        # What is not the messages (system prompt, tools, what the character estimate of
        # the messages misses): the same after compacting.
        fixed = max(estimate - tokens(sent_chars), 0)
        target = int(self.limit * TARGET_SHARE)
        keep_from = max(state.covers, len(messages) - KEEP_LAST_MESSAGES)
        # Old images go first, then old text is trimmed, then the oldest part summarised.
        unimaged = replace(state, unimaged=max(state.unimaged, keep_from))
        trimmed = replace(unimaged, trimmed=max(state.trimmed, keep_from))
        after_unimage = fixed + tokens(sum(_sizes(messages, unimaged)) + _summary_chars(unimaged))
        sizes = _sizes(messages, trimmed)
        after_trim = fixed + tokens(sum(sizes) + _summary_chars(trimmed))
        cuts = [c for c in range(state.covers + 1, keep_from + 1) if cuttable(messages, c)]
        if after_unimage <= target:
            new = unimaged
            after = after_unimage
        elif after_trim <= target or not cuts:
            new = trimmed
            after = after_trim
        else:
            reserve = self._summary_tokens()
            suffix = list(itertools.accumulate(reversed(sizes)))[::-1] + [0]  # suffix[i] = sum(sizes[i:])
            # The least summarised cut that brings the request to the target, else the most.
            chosen = next((c for c in cuts if fixed + tokens(suffix[c]) + reserve <= target), cuts[-1])
            summary, model = await self._summarise(state.summary, messages[state.covers : chosen], view)
            new = Compaction(
                covers=chosen,
                trimmed=max(trimmed.trimmed, chosen),
                unimaged=max(trimmed.unimaged, chosen),
                summary=summary,
                fingerprint=fingerprint(messages, chosen),
                model=model,
            )
            after = fixed + tokens(sum(sizes[chosen:]) + _summary_chars(new))
        new = replace(
            new,
            tokens_before=estimate,
            tokens_after=after,
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        await asyncio.to_thread(self._save, new)
        self.state = new
        self.compactions.append(new)
        view.notice(_notice(state, new), kind="muted")
        if after > self.limit:
            view.notice(
                f"The last exchanges alone are about {after:,} tokens, over the context budget "
                f"({self.limit:,}); the request may be refused. Start a new session with %agent --new.",
                kind="warning",
            )
        return render(messages, new)

    def _save(self, compaction: Compaction) -> None:
        with self.store.connect(mirrored=self.mirrored) as con:
            save(con, self.session_id, compaction)

    def _summary_tokens(self) -> int:
        """max_tokens of a summary: a twentieth of the window, within 256..4,096."""
        return max(256, min(4096, self.window // 20))

    async def _summarise(
        self, earlier: str | None, messages: list[Message], view: StreamView
    ) -> tuple[str, str | None]:
        """A summary of ``earlier`` (the previous summary) and ``messages``; and the model
        that wrote it (``None``: the model call failed and the summary is the prompts)."""
        text = transcript_text(earlier, messages)
        params: RequestParams = {
            "model": self.small_model,
            "max_tokens": self._summary_tokens(),
            "system": SUMMARY_SYSTEM,
            "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        }
        called = time.perf_counter()
        try:
            message = await self.model_client.create(params)
            if self.on_model_call is not None:
                self.on_model_call(message, (time.perf_counter() - called) * 1000)
        except ModelError as exc:
            view.notice(f"Summarising the conversation failed ({exc}); its prompts are kept instead.", kind="warning")
            return _prompts_only(earlier, messages), None
        summary = "".join(getattr(b, "text", "") for b in message.content).strip()
        if not summary:
            return _prompts_only(earlier, messages), None
        return summary, message.model


def _summary_chars(state: Compaction) -> int:
    return chars(_summary_block(state)) if state.summary is not None else 0


def _notice(before: Compaction, after: Compaction) -> str:
    size = f"about {after.tokens_before:,} → {after.tokens_after:,} tokens"
    took = f"{(after.duration_ms or 0) / 1000:.1f} s"
    if after.covers > before.covers:
        what = f"the first {after.covers} messages are now a summary"
    elif after.trimmed > before.trimmed:
        what = "older tool results are shortened"
    else:
        what = "older images are now one-line placeholders"
    return f"Context compacted: {what} ({size}, {took}). The full history stays in the store (%agent_history)."


# -- the text a summary is made from -------------------------------------------------------


def transcript_text(earlier: str | None, messages: list[Message]) -> str:
    """``messages`` as plain text for the summary request, after the previous summary."""
    lines = []
    if earlier:
        lines += ["Summary of the conversation before this part:", earlier, "", "The conversation went on:"]
    names: dict[str, str] = {}
    for message in messages:
        role = message["role"]
        content = message["content"]
        if isinstance(content, str):
            lines.append(f"[{role}] {content}")
            continue
        for block in content:
            if block["type"] == "text" and str(block.get("text", "")).strip() and not is_turn_context(block):
                lines.append(f"[{role}] {block['text']}")
            elif block["type"] == "tool_use":
                names[block.get("id", "")] = block.get("name", "tool")
                lines.append(
                    f"[{role} calls {block.get('name')}] {_piece(json.dumps(block.get('input'), default=str))}"
                )
            elif block["type"] == "tool_result":
                short = trim_result(block).get("content")
                body = short if isinstance(short, str) else json.dumps(short, default=str)
                error = " (error)" if block.get("is_error") else ""
                lines.append(f"[result of {names.get(block.get('tool_use_id', ''), 'tool')}{error}] {_piece(body)}")
            elif block["type"] == "compaction" and block.get("content"):
                lines.append(f"[earlier summary] {block['content']}")
    text = "\n".join(lines)
    if len(text) > SUMMARY_INPUT_CHARS:
        half = SUMMARY_INPUT_CHARS // 2
        text = text[:half] + "\n[... the middle of this part is left out ...]\n" + text[-half:]
    return text


def _piece(text: str) -> str:
    if len(text) <= SUMMARY_PIECE_CHARS:
        return text
    head = SUMMARY_PIECE_CHARS * 2 // 3
    return text[:head] + " [...] " + text[-(SUMMARY_PIECE_CHARS - head) :]


def _prompts_only(earlier: str | None, messages: list[Message]) -> str:
    """A summary without a model: the earlier summary and the user's prompts, shortened."""
    prompts = []
    for message in messages:
        if message["role"] != "user":
            continue
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        said = " ".join(
            str(b.get("text", "")) for b in blocks if b.get("type") == "text" and not is_turn_context(b)
        ).strip()
        if said:
            prompts.append("- " + _piece(said)[:300])
    parts = [earlier] if earlier else []
    parts.append("The user asked, in order:\n" + "\n".join(prompts[-40:]))
    return "\n\n".join(parts)
