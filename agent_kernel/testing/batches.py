"""The Message Batches API of the scripted model: create, retrieve, results (JSONL), cancel.

Each request of a batch is answered when the batch is created, in order, like any
``POST /v1/messages`` (the script, then the responder; a :class:`Failure` becomes an
``errored`` result). The batch then reports ``in_progress`` for :attr:`Batches.polls`
retrieves, its counts growing with each, and ``ended`` after that, with a ``results_url``
the SDK reads the JSONL results from.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Protocol

from agent_kernel.testing.script import Failure, Reply
from agent_kernel.testing.wire import (
    BatchesRequest,
    BatchOutcome,
    BatchResult,
    BatchStatus,
    ErrorBody,
    Message,
    MessagesRequest,
)

__all__ = ["Batches"]

ROUTE = "/v1/messages/batches"


class Answers(Protocol):
    """What answers a batch's requests (the :class:`~agent_kernel.testing.ScriptedModel`)."""

    def complete(self, body: MessagesRequest) -> tuple[Reply | Failure, Message | None]: ...


@dataclass
class _Batch:
    id: str
    created_at: datetime
    results: list[BatchResult]  # one JSONL line each, in request order
    polls: int = 0
    canceled: bool = False
    ended_at: datetime | None = None


@dataclass
class Batches:
    """The batches one :class:`~agent_kernel.testing.ScriptedModel` holds.

    ``polls``: how many retrieves report ``in_progress`` before the batch has ended.
    ``created``: each create request's body, as sent.
    """

    model: Answers
    polls: int = 2
    created: list[BatchesRequest] = field(default_factory=list)
    _batches: dict[str, _Batch] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handles(self, path: str) -> bool:
        return ROUTE in path

    def respond(self, method: str, path: str, body: BatchesRequest) -> tuple[int, BatchStatus | ErrorBody | bytes]:
        """The status and JSON (or JSONL bytes) answering ``method path``."""
        rest = path.split(ROUTE, 1)[1].strip("/")
        parts = rest.split("/") if rest else []
        if method == "POST" and not parts:
            return 200, self._create(body)
        batch = self._batches.get(parts[0]) if parts else None
        if batch is None:
            return 404, _error("not_found_error", f"No message batch {parts[0] if parts else ''!r}")
        if method == "GET" and len(parts) == 1:
            with self._lock:
                batch.polls += 1
                if batch.polls > self.polls and batch.ended_at is None:
                    batch.ended_at = _now()
            return 200, self._status(batch)
        if method == "GET" and parts[1:] == ["results"]:
            if batch.ended_at is None:
                return 400, _error("invalid_request_error", f"Message batch {batch.id} has not ended yet")
            return 200, "".join(json.dumps(line) + "\n" for line in batch.results).encode()
        if method == "POST" and parts[1:] == ["cancel"]:
            with self._lock:
                if batch.ended_at is None:
                    batch.canceled = True
                    batch.ended_at = _now()
                    for line in batch.results:
                        line["result"] = {"type": "canceled"}
            return 200, self._status(batch)
        return 404, _error("not_found_error", f"No route {method} {path}")

    def _create(self, body: BatchesRequest) -> BatchStatus:
        self.created.append(body)
        results: list[BatchResult] = []
        for item in body.get("requests") or []:
            params = item.get("params")
            answer, message = self.model.complete(params.copy() if params else {})
            outcome: BatchOutcome
            if isinstance(answer, Failure):
                outcome = {
                    "type": "errored",
                    "error": {"type": "error", "error": {"type": answer.type, "message": answer.message}},
                }
            else:
                outcome = {"type": "succeeded", "message": message}
            results.append({"custom_id": item.get("custom_id"), "result": outcome})
        batch = _Batch(f"msgbatch_scripted_{next(self._ids):04d}", _now(), results)
        with self._lock:
            self._batches[batch.id] = batch
        return self._status(batch)

    def _status(self, batch: _Batch) -> BatchStatus:
        total = len(batch.results)
        ended = batch.ended_at is not None
        # Counts grow with each poll (the API itself moves them only at the end).
        finished = total if ended else min(total, total * batch.polls // (self.polls + 1))
        kinds = [line["result"]["type"] for line in batch.results[:finished]]
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {
                "processing": total - finished,
                "succeeded": kinds.count("succeeded"),
                "errored": kinds.count("errored"),
                "canceled": kinds.count("canceled"),
                "expired": kinds.count("expired"),
            },
            "created_at": _iso(batch.created_at),
            "expires_at": _iso(batch.created_at + timedelta(hours=24)),
            "ended_at": _iso(batch.ended_at) if ended else None,
            "cancel_initiated_at": _iso(batch.ended_at) if batch.canceled else None,
            "archived_at": None,
            # Relative: the SDK reads it from the base URL it was given (the API's is absolute).
            "results_url": f"{ROUTE}/{batch.id}/results" if ended else None,
        }


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(value: datetime | None) -> str:
    assert value is not None, "a batch's time is set before it is shown"
    return value.isoformat().replace("+00:00", "Z")


def _error(error_type: str, message: str) -> ErrorBody:
    return {"type": "error", "error": {"type": error_type, "message": message}}
