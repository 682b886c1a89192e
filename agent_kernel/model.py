"""The model at the other end of ``ANTHROPIC_BASE_URL``, through the official SDK.

The SDK streams, retries 408/409/429/5xx/529 before a stream starts, and times out. What
it does not do is retry an error that arrives *inside* a stream (an ``overloaded_error``
event after a 200 response); :meth:`ModelClient.stream` retries that itself, a bounded
number of times. Errors a retry cannot fix become a :class:`~agent_kernel.errors.ModelError`
whose message is one line saying what happened and what to do.

``anthropic`` is imported on the first call, never when the extension loads.
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import TYPE_CHECKING, Any, Protocol

from .errors import MissingKeyError, ModelError

if TYPE_CHECKING:
    from anthropic.types import Message

_RETRYABLE_STREAM_ERRORS = {"overloaded_error", "api_error"}
# How the API words a 400 about the prompt's length ("prompt is too long: 215000 tokens >
# 200000 maximum", "input length and `max_tokens` exceed context limit: ...").
_PROMPT_TOO_LONG = re.compile(
    r"prompt is too long|exceeds? (the )?context (limit|window)|context (window|length) exceeded|too many (input )?tokens",
    re.IGNORECASE,
)


class StreamView(Protocol):
    """Where a streaming response is shown as it arrives."""

    def text(self, delta: str) -> None: ...
    def end_text(self) -> None: ...
    def tool_started(self, tool_use_id: str, name: str) -> None: ...
    def tool_input(self, tool_use_id: str, partial: Any) -> None: ...
    def new_attempt(self) -> None: ...
    def retract(self) -> None: ...
    def notice(self, text: str, *, kind: str = "info") -> None: ...


class ModelClient:
    """One ``AsyncAnthropic`` client, made when first needed."""

    def __init__(self, *, max_retries: int = 2) -> None:
        self.max_retries = max_retries
        self._client: Any = None
        self._client_key: tuple[str | None, ...] | None = None

    def client(self) -> Any:
        key = api_key()
        base_url = os.environ.get("ANTHROPIC_BASE_URL")
        identity = (key, os.environ.get("ANTHROPIC_AUTH_TOKEN"), base_url)
        if self._client is None or identity != self._client_key:
            import anthropic

            self._client = anthropic.AsyncAnthropic(max_retries=self.max_retries)
            self._client_key = identity
        return self._client

    async def stream(
        self, params: dict[str, Any], view: StreamView, *, retries: int = 3
    ) -> Message:
        """Stream one response into ``view``; retry mid-stream overloads up to ``retries`` times."""
        import anthropic

        client = self.client()
        attempt = 0
        while True:
            view.new_attempt()
            try:
                return await _stream_once(client, params, view)
            except anthropic.APIStatusError as exc:
                kind = getattr(exc, "type", None)
                mid_stream = exc.response.status_code == 200
                if not (mid_stream and kind in _RETRYABLE_STREAM_ERRORS) or attempt >= retries:
                    raise ModelError(describe_api_error(exc, params.get("model"))) from exc
                attempt += 1
                view.retract()
                delay = min(0.5 * 2 ** (attempt - 1), 8.0)
                view.notice(
                    f"The model was overloaded mid-response; retrying ({attempt}/{retries}) in {delay:g} s.",
                    kind="muted",
                )
                await asyncio.sleep(delay)
            except anthropic.APIError as exc:
                raise ModelError(describe_api_error(exc, params.get("model"))) from exc


async def _stream_once(client: Any, params: dict[str, Any], view: StreamView) -> Message:
    current_tool: str | None = None
    async with client.messages.stream(**params) as stream:
        async for event in stream:
            kind = event.type
            if kind == "text":
                view.text(event.text)
            elif kind == "content_block_start":
                block = event.content_block
                if block.type == "tool_use":
                    current_tool = block.id
                    view.tool_started(block.id, block.name)
            elif kind == "input_json" and current_tool is not None:
                view.tool_input(current_tool, event.snapshot)
            elif kind == "content_block_stop":
                if event.content_block.type == "text":
                    view.end_text()
                current_tool = None
        return await stream.get_final_message()


def api_key() -> str | None:
    """The key the SDK will use; raise :class:`MissingKeyError` when there is none."""
    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key and not os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        raise MissingKeyError(
            "No Anthropic API key: set ANTHROPIC_API_KEY in the kernel's environment "
            "(for example %env ANTHROPIC_API_KEY=sk-ant-...) and run the cell again."
        )
    return key


def tokens_used(message: Message) -> int:
    """Input (cached or not) plus output tokens of one response."""
    usage = message.usage
    return (
        (usage.input_tokens or 0)
        + (usage.output_tokens or 0)
        + (getattr(usage, "cache_creation_input_tokens", 0) or 0)
        + (getattr(usage, "cache_read_input_tokens", 0) or 0)
    )


def describe_api_error(exc: Exception, model: str | None = None) -> str:
    """One line: what failed, the API's own message, and what to do next."""
    import anthropic

    message = getattr(exc, "api_message", None) or getattr(exc, "message", None) or str(exc)
    request_id = getattr(exc, "request_id", None)
    suffix = f" (request id {request_id})" if request_id else ""
    status = getattr(exc, "status_code", None)
    kind = getattr(exc, "type", None)
    label = f"{status} {kind}" if kind else f"{status}"
    if isinstance(exc, anthropic.APITimeoutError):
        return f"The model did not answer in time: {message}. Run the cell again.{suffix}"
    if isinstance(exc, anthropic.APIConnectionError):
        base = os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        return f"Could not reach the model at {base}: {message}. Check the network or ANTHROPIC_BASE_URL."
    if isinstance(exc, anthropic.AuthenticationError):
        hint = "Check ANTHROPIC_API_KEY (it may be mistyped or revoked)."
    elif isinstance(exc, anthropic.PermissionDeniedError):
        hint = "The key is not allowed to do this; check its workspace and model access."
    elif isinstance(exc, anthropic.NotFoundError):
        hint = f"Check the model name (now {model!r}, set with --model or %config AgentKernel.model)."
    elif isinstance(exc, anthropic.RateLimitError):
        hint = "Rate limited even after retries; wait a minute and run the cell again."
    elif isinstance(exc, anthropic.BadRequestError):
        if _PROMPT_TOO_LONG.search(message):
            hint = "The conversation has grown too long for the model: start a new one with %agent --new."
        else:
            hint = "Change what the message names (a setting, --model, the prompt) and run the cell again."
    elif status and status >= 500 or kind in _RETRYABLE_STREAM_ERRORS:
        hint = "The API is unavailable or overloaded even after retries; run the cell again later."
    else:
        hint = "Run the cell again; if it persists, start a new session with %agent --new."
    return f"Model request failed ({label}): {message}. {hint}{suffix}"
