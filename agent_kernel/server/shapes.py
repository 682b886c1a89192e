"""The JSON of the REST API under ``/agent-kernel/api/``: what each route answers and the
request bodies it takes (the JupyterLab extension sends and reads the same shapes).

Instants are ISO 8601 UTC strings; paths inside the server's root are also given relative
to it (``notebook_path``, ``output_notebook``), None where they lie outside it.

:data:`Reply` is every JSON object a route answers with: a handler's reply must be one of
these shapes (``_Handler.reply`` takes nothing else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from agent_kernel.grants import GrantsJson
from agent_kernel.scheduler.records import ComparisonJson, JobVersionJson, NotifySetting, RunRecord
from agent_kernel.store.provenance import RecordJson

if TYPE_CHECKING:
    from typing_extensions import NotRequired

    from agent_kernel.model.shapes import ContentBlock, Role


class ErrorJson(TypedDict):
    """Every refusal (400, 404, 503): what to change, in words."""

    message: str


# -- sessions -------------------------------------------------------------------------------


class SessionJson(TypedDict):
    """``GET /sessions`` (as ``{"sessions": [...]}``): one session."""

    id: str
    name: str
    notebook: str | None
    notebook_path: str | None
    state: str
    model: str | None
    tokens: int
    token_limit: int | None
    cost: float | None  # US dollars of its priced model calls; None when none was priced
    parent_id: str | None
    last_error: str | None
    created_at: str | None
    updated_at: str | None


class MessageJson(TypedDict):
    """One stored message of a session, its content blocks as the API sent or took them."""

    seq: int
    turn: int
    role: Role
    content: list[ContentBlock]
    created_at: str | None


class SessionDetailJson(SessionJson):
    """``GET /sessions/ID``: the session with its latest messages."""

    messages: list[MessageJson]
    messages_total: int


class SessionsJson(TypedDict):
    sessions: list[SessionJson]


# -- jobs and runs --------------------------------------------------------------------------


class JobJson(TypedDict):
    """``GET /jobs`` (as ``{"jobs": [...]}``), ``GET /jobs/ID``, ``PATCH /jobs/ID``: one job
    with its latest run."""

    id: str
    name: str
    kind: str
    type: str
    schedule: str
    cron: str | None
    at: str | None
    timezone: str
    notebook: str | None
    notebook_path: str | None
    task: str | None
    parameters: dict[str, object]  # JSON values by name, as papermill injects them
    overlap: str
    enabled: bool
    next_run: str | None
    last_run: str | None
    last_status: str | None
    last_run_id: str | None
    created_by: str | None
    created_at: str | None
    version: int  # counted up by each change (GET /jobs/ID/versions lists them)
    timeout_s: float
    notify: NotifySetting | None  # {targets: [names], on}: never a URL
    explain: bool  # failed runs are explained by the small model
    grants: GrantsJson | None  # standing grants the person set: {hosts, after_untrusted}; None: none
    granted_by: str | None  # the person's event that set them ("server: PATCH ... by jupyterlab:USER")


class SchedulerStatusJson(TypedDict):
    """Whether a scheduler runs (jobs fire only while one does)."""

    running: bool
    in_server: bool
    message: NotRequired[str]  # how to start one, when none runs
    holder: NotRequired[str]  # the scheduler that leads, when one runs


class JobsJson(TypedDict):
    """``GET /jobs``: every job, and whether a scheduler runs them."""

    jobs: list[JobJson]
    scheduler: SchedulerStatusJson


class CreatedJobJson(JobJson):
    """``POST /jobs``: the job made, and whether anything will run it."""

    scheduler: SchedulerStatusJson


class DeletedJobJson(TypedDict):
    """``DELETE /jobs/ID``."""

    deleted: bool
    id: str


class JobVersionsJson(TypedDict):
    """``GET /jobs/ID/versions``: the job's versions, newest first."""

    id: str
    version: int  # its current version
    versions: list[JobVersionJson]


class RunJson(RunRecord):
    """``GET /runs`` (as ``{"runs": [...]}``), ``POST /jobs/ID/run``: one run."""

    job_name: str | None
    output_notebook: str | None


class QueuedRunJson(RunJson):
    """``POST /jobs/ID/run``: the run queued, and whether a scheduler will start it."""

    scheduler: SchedulerStatusJson


class RunsJson(TypedDict):
    runs: list[RunJson]


class RunDetailJson(RunJson):
    """``GET /runs/ID``, ``POST /runs/ID`` ``{"action": "explain"}``: the run with the tails
    of its logs (``runner``, ``stdout``, ``stderr``)."""

    log: dict[str, str]


class CancelledRunJson(TypedDict):
    """``POST /runs/ID`` ``{"action": "cancel"}``: the run's status after the request
    (CANCELLED when it was queued; RUNNING while its scheduler stops it)."""

    id: str
    status: str


class OpenedRunJson(TypedDict):
    """``POST /runs/ID`` ``{"action": "open"}``: its output notebook inside the root, None
    when it left none."""

    id: str
    path: str | None


class RunDiffJson(ComparisonJson):
    """``GET /runs/ID/diff?other=RUN``: the two runs compared, also as text."""

    text: str


class RunOutputJson(TypedDict):
    """``GET /runs/ID/output``: the run's output notebook as a static HTML page."""

    id: str
    job_name: str
    status: str
    html: str


class JobRequest(TypedDict, total=False):
    """``POST /jobs``: a notebook to run on a schedule (``cron``) or once (``at``)."""

    name: str
    notebook: str  # relative to the server's root
    cron: str
    at: str
    timezone: str
    parameters: dict[str, object]  # JSON values by name, as papermill injects them
    overlap: str
    grants: GrantsJson | None  # what its unattended runs may do after untrusted content (the person's)


class JobChangeRequest(TypedDict, total=False):
    """``PATCH /jobs/ID``: any of the job's fields to change (a new version), and/or turn it on or off."""

    enabled: bool
    name: str
    notebook: str  # relative to the server's root
    task: str
    cron: str
    at: str
    timezone: str
    parameters: dict[str, object]  # JSON values by name, as papermill injects them
    overlap: str
    catchup: str
    max_catchup: int
    model: str
    token_limit: int
    timeout_s: float
    cell_timeout_s: float
    max_retries: int
    retry_on: str
    retry_delay_s: float
    notify: dict[str, object] | None  # {targets: [names of agent-kernel notify list], on}; null: none
    explain: bool
    grants: GrantsJson | None  # replaces the standing grants (null or {}: none); the request is the person's event


class RunNowRequest(TypedDict, total=False):
    """``POST /jobs/ID/run`` (the body is optional): values this run uses over the job's
    parameters, by name; the job keeps its own."""

    parameters: dict[str, object]  # JSON values by name, as papermill injects them


class RunActionRequest(TypedDict):
    """``POST /runs/ID``: open its output notebook, cancel it, or explain why it failed."""

    action: Literal["open", "cancel", "explain"]


# -- stats ----------------------------------------------------------------------------------


class DayJson(TypedDict):
    day: str
    code_runs: int
    failures: int
    cost: float | None


class SourceUsageJson(TypedDict):
    """The model calls of one source (``turn`` or ``completion``) over the period."""

    calls: int
    input_tokens: int  # cached or not
    output_tokens: int
    cost: float | None  # US dollars of the priced calls; None when none was priced


class StoreSizeJson(TypedDict):
    """The store's size on disk and its growth, estimated from the share of rows written in
    the last 7 days (``agent-kernel store stats`` shows more)."""

    bytes: int
    per_day: int  # bytes a day over the last 7 days
    oldest: str | None  # the oldest message, ISO 8601 UTC
    text: str  # one line: "412.3 MB on disk, growing about 3.1 MB a day (last 7 days), ..."


class StatsJson(TypedDict):
    """``GET /stats?days=N``: code runs, failures by category, tool calls, tokens, cost per
    day, model calls by source (``turn``: %agent turns; ``completion``: inline completion),
    and the store's size."""

    days: int
    model_calls: dict[str, SourceUsageJson]
    code_runs: int
    succeeded: int
    failed: int
    mean_ms: float | None
    failures_by_category: dict[str, int]
    tool_calls: int
    tool_errors: int
    top_tools: dict[str, int]
    tokens: int
    per_day: list[DayJson]
    store: StoreSizeJson


# -- tainted kept items ---------------------------------------------------------------------


class TaintedItemJson(RecordJson):
    """A kept item whose latest write came from a turn that had read untrusted content."""

    session: str | None  # the name of the session that wrote it


class TaintedJson(TypedDict):
    """``GET /tainted``."""

    items: list[TaintedItemJson]
    total: int
    kinds: list[str]


class ClearRequest(TypedDict, total=False):
    """``POST /tainted/clear``: ``{"kind", "name"}`` (one item), ``{"kind"}`` (a kind) or ``{"all": true}``."""

    kind: str
    name: str
    all: Literal[True]


class ClearedJson(TypedDict):
    cleared: int
    kind: str | None
    name: str | None


# -- inline completion ----------------------------------------------------------------------


class CompletionStatusJson(TypedDict):
    """``GET /completion``: whether inline completion is on, with which model, why not."""

    enabled: bool
    model: str
    reason: str | None


class CompletionTextLine(TypedDict):
    """``POST /completion``, one line of its stream: the next piece of text to insert."""

    text: str


class CompletionDoneLine(TypedDict):
    """The stream's last line when the model answered."""

    done: Literal[True]
    model: str
    stop_reason: str | None


class CompletionErrorLine(TypedDict):
    """The stream's last line when the model call failed."""

    error: str


class CompletionOffLine(TypedDict):
    """The stream's only line when completion is off."""

    off: str


CompletionLine = CompletionTextLine | CompletionDoneLine | CompletionErrorLine | CompletionOffLine


# -- the Anthropic API key ------------------------------------------------------------------


class KeyStatusJson(TypedDict):
    """``GET``, ``PUT`` and ``DELETE /key``: where the server's key comes from, never the key."""

    has_key: bool
    source: Literal["environment", "keyring", "file", "none"]
    where: str  # the keyring's backend, the key file's path, the variable's name ('' for none)
    message: str  # one sentence for the panel


class KeyRequest(TypedDict):
    """``PUT /key``: the key to store (kept outside every notebook, never answered back)."""

    key: str


# -- every reply ----------------------------------------------------------------------------

Reply = (
    ErrorJson
    | SessionsJson
    | SessionDetailJson
    | JobsJson
    | JobJson
    | CreatedJobJson
    | DeletedJobJson
    | JobVersionsJson
    | QueuedRunJson
    | RunsJson
    | RunDetailJson
    | CancelledRunJson
    | OpenedRunJson
    | RunDiffJson
    | RunOutputJson
    | StatsJson
    | TaintedJson
    | ClearedJson
    | CompletionStatusJson
    | KeyStatusJson
)
