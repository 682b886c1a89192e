"""A run's directory: everything one run reads and leaves behind.

::

    runs/<job_id>/<run_id>/
        spec.json      what to run (RunSpec)
        input.ipynb    the generated notebook (task, reminder and pulse jobs)
        output.ipynb   the executed notebook, saved after every cell (partial on failure)
        stdout.log     the cells' stdout        stderr.log   the cells' stderr
        runner.log     the runner process's own output (papermill, tracebacks)
        progress.json  cells done / total, the current cell
        result.json    how the runner saw the end (the executor has the last word)
        heartbeat      touched by the scheduler that owns the run; stale -> the run stops
        cancel         present -> the run is stopped as CANCELLED

Executors on other machines (Dask) read and write it too, so it must be on a file
system they share.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from agent_kernel.scheduler.records import ProgressReport, RunnerReport


class RunDir:
    """Paths and small atomic reads/writes inside one run's directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def for_run(cls, home: Path, job_id: str, run_id: str) -> RunDir:
        return cls(Path(home) / "runs" / job_id / run_id)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    spec = property(lambda self: self.path / "spec.json")
    input = property(lambda self: self.path / "input.ipynb")
    output = property(lambda self: self.path / "output.ipynb")
    stdout = property(lambda self: self.path / "stdout.log")
    stderr = property(lambda self: self.path / "stderr.log")
    runner_log = property(lambda self: self.path / "runner.log")
    progress = property(lambda self: self.path / "progress.json")
    result = property(lambda self: self.path / "result.json")
    heartbeat = property(lambda self: self.path / "heartbeat")
    cancel = property(lambda self: self.path / "cancel")

    def create(self) -> RunDir:
        self.path.mkdir(parents=True, exist_ok=True)
        return self

    def write_json(self, target: Path, data: Mapping[str, object]) -> None:
        """Write ``data`` so that a reader never sees half a file."""
        partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(data, default=str), encoding="utf-8")
        os.replace(partial, target)

    def read_json(self, target: Path) -> dict[str, object] | None:
        try:
            data: dict[str, object] = json.loads(target.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data

    def runner_report(self) -> RunnerReport | None:
        """``result.json`` as the runner wrote it; None before it has."""
        return cast("RunnerReport | None", self.read_json(self.result))

    def progress_report(self) -> ProgressReport | None:
        """``progress.json`` as the runner last wrote it; None before it has."""
        return cast("ProgressReport | None", self.read_json(self.progress))

    def touch_heartbeat(self) -> None:
        self.heartbeat.touch()

    def heartbeat_age(self) -> float:
        """Seconds since the owner last touched the heartbeat (0 when there is none)."""
        try:
            return float(max(time.time() - self.heartbeat.stat().st_mtime, 0.0))
        except OSError:
            return 0.0

    def request_cancel(self, reason: str = "cancelled") -> None:
        self.cancel.write_text(reason, encoding="utf-8")

    def cancel_reason(self) -> str | None:
        try:
            return self.cancel.read_text(encoding="utf-8").strip() or "cancelled"
        except OSError:
            return None

    def log_tail(self, target: Path, chars: int = 2000) -> str:
        try:
            with target.open("rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(size - chars, 0))
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
