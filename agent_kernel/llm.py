"""One model call from Python or a tool (:func:`generate`), or many at once (:func:`generate_many`).

A single request to a Claude model chosen by *intelligence* (``low``, ``medium``, ``high``:
``AgentKernel.small_model``, ``medium_model``, ``large_model``), with no tools and no
conversation. With ``schema`` (a JSON Schema) the request asks for the API's JSON-schema
output format, and the reply is parsed and validated against the schema as given (by
fastjsonschema):
``result.parsed`` holds the value, and a reply that does not match fails with the
validation message.

Where the call goes and what it counts toward:

- inside an agent turn (a tool, ``run_code``, an agent-defined tool): the turn's model
  client; each call is stored in ``model_calls`` and counts toward the session's tokens,
  cost and limits (a session past its limit makes no more calls);
- in a notebook with the extension loaded: the kernel agent's model client and settings;
- elsewhere: ``Agent(...)`` given as ``agent=``, else the SDK's own client and the default
  settings. Calls outside a turn are not stored; their usage is in each result.

A Message Batch's calls are counted at the list price (the batch discount is not applied).

Every request goes out through :class:`~agent_kernel.model.client.ModelClient` (or, for batches,
through :func:`agent_kernel.secrets.scrub`), so secrets are redacted from prompts as from
everything else sent to the model.

The synchronous functions may be called anywhere, also from code that runs inside an
awaited turn (the thread's event loop is busy running that turn): their requests run on
an event loop of their own in a background thread while the caller waits, so nothing
waits on the loop the caller is blocking. ``await agenerate(...)`` and
``await agenerate_many(...)`` run on the caller's loop instead, which keeps a notebook's
widgets (Stop) responsive while they run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agent_kernel.errors import AgentKernelError, ModelError
from agent_kernel.model import calls
from agent_kernel.model.calls import Caller

if TYPE_CHECKING:
    from anthropic.resources.messages.batches import AsyncBatches
    from anthropic.types import Message
    from anthropic.types.messages import MessageBatchResult

    from agent_kernel.config import AgentKernel
    from agent_kernel.model.client import ModelClient
    from agent_kernel.model.json_schemas import Validator
    from agent_kernel.model.shapes import RequestParams

__all__ = [
    "LEVELS", "Generation", "GenerationError", "agenerate", "agenerate_many", "generate", "generate_many",
]  # fmt: skip

LEVELS = ("low", "medium", "high")
DEFAULT_MAX_TOKENS = 4096
DEFAULT_CONCURRENCY = 8
MAX_CONCURRENCY = 256
BATCH_POLL_S = 10.0
MAX_BATCH_REQUESTS = 100_000  # the Message Batches API's limit per batch
_REPLY_SHOWN_CHARS = 500  # of a reply that failed its schema, in the error

T = TypeVar("T")


class Agent(Protocol):
    """What calls need of an :class:`agent_kernel.Agent` (named so to keep this module below it)."""

    @property
    def model_client(self) -> ModelClient: ...

    @property
    def config(self) -> AgentKernel: ...


class GenerationError(AgentKernelError):
    """A call that gave no usable answer: a reply not matching the schema, a refusal, a
    model error. ``result`` is what came back (its text and usage, when there was a reply)."""

    def __init__(self, message: str, result: Generation | None = None) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class Generation:
    """What one call returned. ``error`` is set (and ``text`` may be partial) when it failed."""

    text: str = ""
    parsed: Any = None
    usage: dict[str, int] = field(default_factory=dict)
    model: str = ""
    stop_reason: str | None = None
    error: str | None = None
    structured: bool = False  # a schema was asked for: ``parsed`` is the answer

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, object]:
        """``{text, parsed?, usage}`` (and ``error`` when it failed), as the tool returns it."""
        out: dict[str, object] = {"text": self.text}
        if self.structured and self.error is None:
            out["parsed"] = self.parsed
        out["usage"] = dict(self.usage)
        if self.error is not None:
            out["error"] = self.error
        return out

    def __repr__(self) -> str:
        if self.error is not None:
            return f"Generation(error={_short(self.error, 80)!r})"
        shown = (
            f"parsed={_short(json.dumps(self.parsed, default=str), 60)}"
            if self.structured
            else (f"text={_short(self.text, 60)!r}")
        )
        return f"Generation({shown}, usage={self.usage})"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the request ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    """One call's request parameters, and the validator its reply must pass (with a schema)."""

    params: RequestParams
    validator: Validator | None = None

    @property
    def model(self) -> str:
        return self.params["model"]

    def with_prompt(self, prompt: str) -> _Request:
        return _Request({**self.params, "messages": [{"role": "user", "content": prompt}]}, self.validator)


def _request(
    prompt: str,
    settings: AgentKernel,
    *,
    system: str | None,
    intelligence: str,
    schema: dict[str, object] | None,
    max_tokens: int | None,
    temperature: float | None,
) -> _Request:
    """The request for these arguments; ``ValueError`` says what is wrong with one."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a string, not {type(prompt).__name__}.")
    if intelligence not in LEVELS:
        raise ValueError(f"intelligence must be one of {', '.join(LEVELS)}, not {intelligence!r}.")
    model = {"low": settings.small_model, "medium": settings.medium_model, "high": settings.large_model}[intelligence]
    tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise ValueError(f"max_tokens must be a positive whole number, not {max_tokens!r}.")
    params: RequestParams = {
        "model": model,
        "max_tokens": tokens,
        "messages": [{"role": "user", "content": prompt}],
    }
    if system:
        params["system"] = system
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 1:
            raise ValueError(f"temperature must be a number from 0 to 1, not {temperature!r}.")
        _note_temperature()
    validator = None
    if schema is not None:
        validator = _validator(schema)
        params["output_config"] = {"format": {"type": "json_schema", "schema": _api_schema(schema)}}
    return _Request(params, validator)


def _note_temperature() -> None:
    """Say once that ``temperature`` is accepted but not sent.

    The API version the installed SDK speaks (2026-10-21) has no sampling parameters: a
    request carrying ``temperature`` (any value) fails with a 400, and the SDK no longer
    takes it. It stays an argument so calls that pass it (older code, other front ends) keep working.
    """
    import warnings

    warnings.warn(
        "temperature is not sent: the Messages API no longer has sampling parameters "
        "(API version 2026-10-21); the model's own sampling is used.",
        UserWarning,
        stacklevel=4,
    )


def _validator(schema: object) -> Validator:
    """The compiled validator of ``schema``; ``ValueError`` when it is no valid JSON Schema."""
    if not isinstance(schema, dict):
        raise ValueError(f"schema must be a JSON Schema object, not {type(schema).__name__}.")
    try:
        text = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"schema must be plain JSON: {exc}.") from None
    from agent_kernel.model.json_schemas import compiled

    try:
        return compiled(text)
    except ValueError as exc:
        raise ValueError(f"schema is {exc}") from None


def _api_schema(schema: dict[str, object]) -> dict[str, object]:
    """``schema`` in the subset the API's structured outputs accept (the SDK's own transform:
    what it cannot express moves into descriptions; the reply is checked against the original)."""
    from anthropic import transform_schema

    try:
        return transform_schema(schema)
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"schema cannot be used for structured output: {exc}") from None


def _result(message: Message, request: _Request) -> Generation:
    """The :class:`Generation` a response makes, with ``error`` when it is no usable answer."""
    text = "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", None) == "text")
    usage = message.usage
    counted = {
        "input_tokens": int(usage.input_tokens or 0)
        + int(getattr(usage, "cache_read_input_tokens", 0) or 0)
        + int(getattr(usage, "cache_creation_input_tokens", 0) or 0),
        "output_tokens": int(usage.output_tokens or 0),
    }
    result = Generation(
        text=text, usage=counted, model=message.model, stop_reason=message.stop_reason,
        structured=request.validator is not None,
    )  # fmt: skip
    if message.stop_reason == "refusal":
        result.error = "The model declined to answer (stop_reason refusal)."
        return result
    if request.validator is None:
        return result
    if message.stop_reason == "max_tokens":
        result.error = (
            f"The reply was cut off at max_tokens ({request.params['max_tokens']:,}) before its JSON "
            "was complete; raise max_tokens or ask for less."
        )
        return result
    try:
        value = json.loads(text)
    except ValueError as exc:
        result.error = f"The reply is not JSON ({exc}): {_short(text, _REPLY_SHOWN_CHARS)!r}"
        return result
    problem = _schema_problem(request.validator, value)
    if problem is not None:
        result.error = f"The reply does not match the schema: {problem}. Reply: {_short(text, _REPLY_SHOWN_CHARS)}"
        return result
    result.parsed = value
    return result


def _schema_problem(validator: Validator, value: object) -> str | None:
    import fastjsonschema

    try:
        validator(value)
    except fastjsonschema.JsonSchemaValueException as exc:
        return exc.message.removeprefix("data.").removeprefix("data ")
    return None


# -- where calls go, and what they count toward ------------------------------------------------


def _caller(agent: Agent | None) -> Caller:
    """Where calls go: the running turn's caller, else ``agent``'s, else the notebook's, else our own."""
    caller = calls.turn_caller()
    if caller is not None:
        return caller
    if agent is not None:
        return Caller(agent.model_client, agent.config)
    caller = calls.kernel_default()
    if caller is not None:
        return caller
    if not _DEFAULT:
        from agent_kernel.config import AgentKernel
        from agent_kernel.model.client import ModelClient

        _DEFAULT.append(Caller(ModelClient(), AgentKernel()))
    return _DEFAULT[0]


_DEFAULT: list[Caller] = []  # our own caller, made on first use


class _Tally:
    """Counts what calls used and how many items are done, for the turn and the progress bar.

    Calls may finish on another thread (the background loop of the synchronous API): they
    are recorded (in the turn's usage, the progress bar) on the caller's thread, by
    :meth:`drain`, which the waiting caller runs as they come in.
    """

    def __init__(self, caller: Caller, *, same_thread: bool, bar: Any = None) -> None:
        self.record = caller.record
        self.same_thread = same_thread
        self.bar = bar
        self.changed = threading.Event()
        self._lock = threading.Lock()
        self._calls: list[tuple[Message, float | None]] = []
        self._done = 0
        self._status: str | None = None

    def call(self, message: Message, duration_ms: float | None) -> None:
        if self.same_thread:
            self._record(message, duration_ms)
            return
        with self._lock:
            self._calls.append((message, duration_ms))
        self.changed.set()

    def done(self, n: int = 1, status: str | None = None) -> None:
        if self.same_thread:
            self._show(n, status)
            return
        with self._lock:
            self._done += n
            self._status = status or self._status
        self.changed.set()

    def drain(self) -> None:
        with self._lock:
            calls, self._calls = self._calls, []
            done, self._done = self._done, 0
            status, self._status = self._status, None
        for message, duration_ms in calls:
            self._record(message, duration_ms)
        self._show(done, status)

    def close(self) -> None:
        self.drain()
        if self.bar is not None:
            self.bar.close()

    def _record(self, message: Message, duration_ms: float | None) -> None:
        if self.record is not None:
            self.record(message, duration_ms)

    def _show(self, n: int, status: str | None) -> None:
        if self.bar is None:
            return
        if status:
            self.bar.set_postfix_str(status, refresh=False)
        if n:
            self.bar.update(n)
        elif status:
            self.bar.refresh()


def _progress_bar(total: int, description: str, shown: bool) -> Any:
    """A tqdm bar: in a kernel, one display the saved notebook keeps as it ended; else on stderr."""
    if not shown or total == 0:
        return None
    from agent_kernel.display.progress import progress_bar

    return progress_bar(total, description, "call")


# -- the background loop of the synchronous API -------------------------------------------------


class _Worker:
    """An event loop on a daemon thread; the synchronous API runs its requests there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="agent-kernel-llm", daemon=True)
        self.thread.start()

    def submit(self, coroutine: Awaitable[T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)  # type: ignore[arg-type]


_WORKER: _Worker | None = None
_WORKER_LOCK = threading.Lock()


def _worker() -> _Worker:
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = _Worker()
        return _WORKER


def _wait(make: Callable[[], Awaitable[T]], tally: _Tally) -> T:
    """Run ``make()`` on the background loop while this thread records what it reports."""
    worker = _worker()
    if threading.current_thread() is worker.thread:
        raise RuntimeError(
            "agent_kernel.llm: on its own loop, use `await agenerate(...)` / `await agenerate_many(...)`."
        )
    future = worker.submit(make())
    future.add_done_callback(lambda _: tally.changed.set())
    try:
        while not future.done():
            tally.changed.wait(0.5)  # woken by each call and item done; a timeout keeps Ctrl-C prompt
            tally.changed.clear()
            tally.drain()
        return future.result()
    except BaseException:
        future.cancel()  # an interrupt: the requests still waiting are not sent
        raise
    finally:
        tally.close()


# -- one call ---------------------------------------------------------------------------------


async def _one(caller: Caller, request: _Request, tally: _Tally) -> Generation:
    """One request answered; every failure is the result's ``error``, never an exception."""
    model = request.model
    reason = caller.limit_reached() if caller.limit_reached is not None else None
    if reason:
        return Generation(model=model, error=reason, structured=request.validator is not None)
    started = time.perf_counter()
    try:
        message = await caller.client.create(request.params)
    except ModelError as exc:
        return Generation(model=model, error=str(exc), structured=request.validator is not None)
    tally.call(message, (time.perf_counter() - started) * 1000)
    return _result(message, request)


def _raise_failed(result: Generation) -> Generation:
    if result.error is not None:
        raise GenerationError(result.error, result)
    return result


def generate(
    prompt: str,
    *,
    system: str | None = None,
    intelligence: str = "low",
    schema: dict[str, object] | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    agent: Agent | None = None,
) -> Generation:
    """One model call: ``prompt`` (and ``system``) to the model ``intelligence`` names.

    Returns a :class:`Generation` (``text``, ``parsed`` with a ``schema``, ``usage``);
    raises :class:`GenerationError` when there is no usable answer (a reply that does not
    match ``schema`` says how), ``ValueError`` for a bad argument. ``max_tokens`` defaults
    to 4,096. ``temperature`` (0 to 1) is checked but not sent: the API no longer has
    sampling parameters (a warning says so). ``agent``: whose model
    client and settings to use outside a turn (by default the notebook's).
    """
    caller = _caller(agent)
    request = _request(
        prompt, caller.settings, system=system, intelligence=intelligence, schema=schema,
        max_tokens=max_tokens, temperature=temperature,
    )  # fmt: skip
    tally = _Tally(caller, same_thread=False)
    return _raise_failed(_wait(lambda: _one(caller, request, tally), tally))


async def agenerate(
    prompt: str,
    *,
    system: str | None = None,
    intelligence: str = "low",
    schema: dict[str, object] | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    agent: Agent | None = None,
) -> Generation:
    """:func:`generate` on the running event loop (``await`` it in a cell or an async tool)."""
    caller = _caller(agent)
    request = _request(
        prompt, caller.settings, system=system, intelligence=intelligence, schema=schema,
        max_tokens=max_tokens, temperature=temperature,
    )  # fmt: skip
    return _raise_failed(await _one(caller, request, _Tally(caller, same_thread=True)))


# -- many calls -------------------------------------------------------------------------------


def generate_many(
    prompts: Iterable[object],
    *,
    system: str | None = None,
    intelligence: str = "low",
    schema: dict[str, object] | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    batch: bool = False,
    progress: bool = True,
    poll_s: float = BATCH_POLL_S,
    agent: Agent | None = None,
) -> Any:
    """:func:`generate` for each of ``prompts`` (a list, or a pandas Series such as a DataFrame column).

    Up to ``concurrency`` requests at a time (the SDK retries rate limits and overloads),
    with a progress bar. Returns one :class:`Generation` per prompt, in input order: a
    list, or a Series with the input's index. An item that failed has its ``error`` set;
    nothing is raised for it. ``batch=True`` sends them all as one Message Batch (half
    the price, results within 24 hours), polled every ``poll_s`` seconds.
    """
    run, tally, shape = _many(
        prompts, agent, system, intelligence, schema, max_tokens, temperature,
        concurrency, batch, progress, poll_s, same_thread=False,
    )  # fmt: skip
    return shape(_wait(run, tally))


async def agenerate_many(
    prompts: Iterable[object],
    *,
    system: str | None = None,
    intelligence: str = "low",
    schema: dict[str, object] | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    batch: bool = False,
    progress: bool = True,
    poll_s: float = BATCH_POLL_S,
    agent: Agent | None = None,
) -> Any:
    """:func:`generate_many` on the running event loop (``await`` it in a cell or an async tool)."""
    run, tally, shape = _many(
        prompts, agent, system, intelligence, schema, max_tokens, temperature,
        concurrency, batch, progress, poll_s, same_thread=True,
    )  # fmt: skip
    try:
        results = await run()
    finally:
        tally.close()
    return shape(results)


def _many(
    prompts: Iterable[object],
    agent: Agent | None,
    system: str | None,
    intelligence: str,
    schema: dict[str, object] | None,
    max_tokens: int | None,
    temperature: float | None,
    concurrency: int,
    batch: bool,
    progress: bool,
    poll_s: float,
    *,
    same_thread: bool,
) -> tuple[Callable[[], Awaitable[list[Generation]]], _Tally, Callable[[list[Generation]], Any]]:
    """What both ``generate_many`` functions run: the checked requests as one coroutine
    factory (a batch or concurrent calls), the tally its calls report to, and the shape of
    the result (a list, or a Series with the input's index)."""
    caller = _caller(agent)
    items, shape = _items(prompts)
    requests = _requests(items, caller.settings, system, intelligence, schema, max_tokens, temperature)
    _check_many(concurrency, batch, len(items))
    bar = _progress_bar(len(items), "llm batch" if batch else "llm", progress)
    tally = _Tally(caller, same_thread=same_thread, bar=bar)
    if batch:
        return (lambda: _batch(caller, requests, tally, poll_s)), tally, shape
    return (lambda: _concurrent(caller, requests, tally, concurrency)), tally, shape


def _check_many(concurrency: int, batch: bool, count: int) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"concurrency must be a whole number from 1 to {MAX_CONCURRENCY}, not {concurrency!r}.")
    if batch and count > MAX_BATCH_REQUESTS:
        raise ValueError(
            f"A Message Batch holds at most {MAX_BATCH_REQUESTS:,} requests, not {count:,}; split the prompts."
        )


def _items(prompts: Iterable[object]) -> tuple[list[object], Callable[[list[Generation]], Any]]:
    """The prompts as a list, and what gives the results the input's shape (a Series stays one)."""
    import sys

    if isinstance(prompts, (str, bytes)):
        raise TypeError("generate_many takes a list of prompts (or a DataFrame column); use generate() for one prompt.")
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(prompts, pandas.DataFrame):
        raise TypeError("generate_many takes one column of prompts, such as df['text'], not a whole DataFrame.")
    if pandas is not None and isinstance(prompts, pandas.Series):
        index, name = prompts.index, prompts.name
        return prompts.tolist(), lambda results: pandas.Series(results, index=index, name=name, dtype=object)
    return list(prompts), lambda results: results


def _requests(
    items: list[object],
    settings: AgentKernel,
    system: str | None,
    intelligence: str,
    schema: dict[str, object] | None,
    max_tokens: int | None,
    temperature: float | None,
) -> list[_Request | Generation]:
    """Each item's request, or its failed result (an item with no prompt); bad arguments raise."""
    base = _request(
        "", settings, system=system, intelligence=intelligence, schema=schema,
        max_tokens=max_tokens, temperature=temperature,
    )  # fmt: skip
    out: list[_Request | Generation] = []
    for number, item in enumerate(items):
        if item is None or (isinstance(item, float) and math.isnan(item)):
            missing = "None" if item is None else "NaN"
            out.append(Generation(error=f"Item {number} has no prompt ({missing}).", structured=schema is not None))
        else:
            out.append(base.with_prompt(item if isinstance(item, str) else str(item)))
    return out


async def _concurrent(
    caller: Caller, requests: list[_Request | Generation], tally: _Tally, concurrency: int
) -> list[Generation]:
    gate = asyncio.Semaphore(concurrency)

    async def answer(request: _Request | Generation) -> Generation:
        if isinstance(request, Generation):
            tally.done()
            return request
        async with gate:
            try:
                result = await _one(caller, request, tally)
            except Exception as exc:  # noqa: BLE001 - one item's failure is its own
                result = Generation(model=request.model, error=f"{type(exc).__name__}: {exc}")
        tally.done()
        return result

    return list(await asyncio.gather(*(answer(r) for r in requests)))


async def _batch(
    caller: Caller, requests: list[_Request | Generation], tally: _Tally, poll_s: float
) -> list[Generation]:
    """All requests as one Message Batch: created, polled until it ended, results matched by id."""
    import anthropic

    from agent_kernel.model.client import describe_api_error
    from agent_kernel.secrets import scrub

    results: list[Generation | None] = [r if isinstance(r, Generation) else None for r in requests]
    sent = {f"item-{i}": r for i, r in enumerate(requests) if isinstance(r, _Request)}
    tally.done(len(requests) - len(sent))

    def fail_all(line: str) -> list[Generation]:
        for key, request in sent.items():
            number = int(key.removeprefix("item-"))
            if results[number] is None:
                results[number] = Generation(model=request.model, error=line)
        return [r for r in results if r is not None]

    if not sent:
        return [r for r in results if r is not None]
    reason = caller.limit_reached() if caller.limit_reached is not None else None
    if reason:
        return fail_all(reason)
    try:
        client = caller.client.client()
        batches = client.messages.batches
        made = await batches.create(requests=[{"custom_id": k, "params": scrub(r.params)} for k, r in sent.items()])
    except anthropic.APIError as exc:
        return fail_all(describe_api_error(exc))
    except ModelError as exc:  # no API key
        return fail_all(str(exc))
    shown = 0
    try:
        while made.processing_status != "ended":
            counts = made.request_counts
            finished = counts.succeeded + counts.errored + counts.canceled + counts.expired
            tally.done(max(finished - shown, 0), f"{made.id}: {made.processing_status}")
            shown = max(shown, finished)
            await asyncio.sleep(poll_s)
            made = await batches.retrieve(made.id)
        tally.done(len(sent) - shown, f"{made.id}: ended")
        async for line in await batches.results(made.id):
            request = sent.get(line.custom_id)
            if request is None:
                continue
            number = int(line.custom_id.removeprefix("item-"))
            results[number] = _batch_result(line.result, request, tally)
    except asyncio.CancelledError:
        await _cancel_batch(batches, made.id)
        raise
    except anthropic.APIError as exc:
        return fail_all(f"Message Batch {made.id}: {describe_api_error(exc)}")
    return fail_all(f"Message Batch {made.id} returned no result for this request.")


def _batch_result(outcome: MessageBatchResult, request: _Request, tally: _Tally) -> Generation:
    model = request.model
    if outcome.type == "succeeded":
        tally.call(outcome.message, None)
        return _result(outcome.message, request)
    if outcome.type == "errored":
        error = getattr(outcome.error, "error", None)
        detail = f"{getattr(error, 'type', 'error')}: {getattr(error, 'message', '')}" if error else "error"
        return Generation(model=model, error=f"The batch request failed ({detail}).")
    return Generation(model=model, error=f"The batch request was {outcome.type} before it ran.")


async def _cancel_batch(batches: AsyncBatches, batch_id: str) -> None:
    """Ask the API to stop a batch whose caller was interrupted (what ran is still billed)."""
    try:
        await asyncio.shield(asyncio.wait_for(batches.cancel(batch_id), 10))
    except BaseException:  # noqa: BLE001 - best effort while interrupted
        pass
