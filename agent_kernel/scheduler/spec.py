"""What one run executes, as plain data, and the notebooks generated for agent jobs.

A :class:`RunSpec` is all an executor needs: it crosses to a Dask worker as a dict. Its
``env`` reaches the runner and, through papermill, the run's kernel: the run and job ids,
and the job's standing grants in ``AGENT_KERNEL_GRANTS`` (:mod:`agent_kernel.grants`).
``task``, ``reminder`` and ``pulse`` jobs run a generated notebook::

    [parameters]   # papermill injects the job's parameters after this cell
    %load_ext agent_kernel
    %%agent --new=<job>-<time>-<run> [--model M] [--token-limit N]     (a task, a pulse)
    %%agent --session <name>                                           (a reminder)
    <the prompt>
    check_turn()   # the run fails unless the agent's turn ended normally

The last cell matters: a turn that ends on a model error or its token limit does not
raise in the notebook, and a scheduled run must not report such a turn as a success.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, cast

from agent_kernel import grants
from agent_kernel.scheduler.cron import zone
from agent_kernel.scheduler.rundir import RunDir

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from agent_kernel.scheduler.jobs import Job
    from agent_kernel.scheduler.records import RunSpecJson
    from agent_kernel.scheduler.runs import Run

_SLUG = re.compile(r"[^A-Za-z0-9_.]+")


@dataclass
class RunSpec:
    """Everything needed to execute one run, anywhere the run directory is reachable."""

    run_id: str
    job_id: str
    job_name: str
    attempt: int
    run_dir: str
    input_path: str
    output_path: str
    cwd: str
    parameters: dict[str, Any] = field(default_factory=dict)
    kernel_name: str | None = None
    timeout_s: float = 3600.0
    cell_timeout_s: float | None = None
    lease_s: float = 60.0
    env: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> RunSpecJson:
        return cast("RunSpecJson", asdict(self))  # its fields, one for one

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSpec:
        """The spec from plain data (a ``spec.json`` written by another version may hold
        fields this one does not know: they are left out)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    @property
    def dir(self) -> RunDir:
        return RunDir(self.run_dir)

    def save(self) -> None:
        self.dir.write_json(self.dir.spec, self.to_dict())

    @classmethod
    def load(cls, run_dir: RunDir) -> RunSpec:
        data = run_dir.read_json(run_dir.spec)
        if data is None:
            raise FileNotFoundError(f"No readable spec.json in {run_dir.path}")
        return cls.from_dict(data)


def build_spec(job: Job, run: Run, run_dir: RunDir, *, lease_s: float, prompt: str | None = None) -> RunSpec:
    """Prepare ``run_dir`` for ``run`` of ``job`` and return its spec.

    ``prompt`` replaces the job's own text (the pulse builds its prompt when it fires).
    Raises ``OSError`` / ``ValueError`` when the job's notebook cannot be used.
    """
    run_dir.create()
    env = {"AGENT_KERNEL_RUN_ID": run.id, "AGENT_KERNEL_JOB_ID": job.id}
    # A run is no open notebook's, whatever the scheduler's own environment says (one started
    # from a notebook's terminal has that notebook's name): its session is its own.
    env["JPY_SESSION_NAME"] = ""
    # Always set, so a run never inherits grants from the scheduler's own environment.
    env[grants.ENV] = json.dumps(job.standing_grants.as_json(), separators=(",", ":"))
    if job.options.get("secrets"):
        # Names only: the values come from the scheduler's own environment.
        env["AGENT_KERNEL_SECRET_ENV"] = ",".join(job.options["secrets"])
    if job.kind == "notebook":
        assert job.notebook is not None
        input_path = job.notebook
        if job.model:
            env["AGENT_KERNEL_MODEL"] = job.model
    else:
        input_path = str(run_dir.input)
        write_notebook(agent_notebook(job, run, prompt if prompt is not None else job.task or ""), input_path)
        if job.kind == "reminder" and job.origin_notebook:
            # The turn continues the session of that notebook (where it is now, should it
            # have been renamed since: the kernel follows the recorded moves).
            env["JPY_SESSION_NAME"] = job.origin_notebook
    spec = RunSpec(
        run_id=run.id,
        job_id=job.id,
        job_name=job.name,
        attempt=run.attempt,
        run_dir=str(run_dir.path),
        input_path=input_path,
        output_path=str(run_dir.output),
        cwd=job.cwd or str(run_dir.path),
        parameters={**job.parameters, **(run.parameters or {})},
        kernel_name=job.kernel,
        timeout_s=job.timeout_s,
        cell_timeout_s=job.cell_timeout_s,
        lease_s=lease_s,
        env=env,
    )
    spec.save()
    run_dir.touch_heartbeat()
    return spec


def session_name(job: Job, run: Run) -> str:
    """A fresh, readable session name for one firing: ``<job>-<local time>-<run>``."""
    slug = _SLUG.sub("-", job.name).strip("-")[:40] or job.kind
    local = run.scheduled_for.astimezone(zone(job.timezone))
    return f"{slug}-{local:%Y%m%d-%H%M}-{run.id[:4]}"


def agent_notebook(job: Job, run: Run, prompt: str) -> NotebookNode:
    """The generated notebook of an agent job (see the module docstring)."""
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, ~1.5 s): only reading or writing a notebook needs it

    if job.kind == "reminder":
        flags = f"--session {_quote(job.session or '')}"
    else:
        flags = f"--new={_quote(session_name(job, run))}"
        if job.model:
            flags += f" --model {_quote(job.model)}"
        if job.token_limit:
            flags += f" --token-limit {int(job.token_limit)}"
    parameters = nbformat.v4.new_code_cell("# Parameters: papermill puts this job's parameters after this cell.")
    parameters.metadata["tags"] = ["parameters"]
    nb: NotebookNode = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["agent_kernel"] = {"job_id": job.id, "run_id": run.id, "kind": job.kind}
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            f"**{_inert_markdown(job.name)}** — scheduled {job.kind}, run `{run.id}` (attempt {run.attempt})"
        ),
        parameters,
        nbformat.v4.new_code_cell("%load_ext agent_kernel"),
        nbformat.v4.new_code_cell(f"%%agent {flags}\n{prompt.strip()}"),
        nbformat.v4.new_code_cell("from agent_kernel.scheduler.spec import check_turn\ncheck_turn()"),
    ]
    return nb


def write_notebook(nb: NotebookNode, path: str) -> None:
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, ~1.5 s): only reading or writing a notebook needs it

    nbformat.write(nb, path)


def check_turn() -> None:
    """In a generated notebook: raise unless the last ``%agent`` turn ended normally."""
    from IPython import get_ipython  # noqa: PLC0415 - IPython: only a spec made inside a kernel asks it

    shell = get_ipython()
    magic = shell.find_magic("agent") if shell is not None else None
    agent = getattr(getattr(magic, "__self__", None), "kernel_agent", None)
    result = getattr(agent, "last_result", None)
    if result is None:
        raise RuntimeError("The %agent turn did not run.")
    if result.state != "idle" or result.error:
        raise RuntimeError(
            f"The agent's turn ended in state {result.state!r}"
            + (f": {result.error}" if result.error else "")
            + " — the scheduled task did not complete."
        )
    print(f"Turn finished: {result.tool_calls} tool calls, {result.tokens:,} tokens, session {result.session!r}.")


def _inert_markdown(text: str) -> str:
    """``text`` shown literally in a Markdown cell: HTML escaped, Markdown syntax backslashed."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|~])", r"\\\1", html.escape(text.replace("\n", " ")))


def _quote(value: str) -> str:
    return value if value and not re.search(r"\s|['\"]", value) else json.dumps(value)
