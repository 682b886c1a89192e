"""A real ipykernel driven through jupyter_client, for tests."""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jupyter_client.manager import KernelManager


@dataclass
class Execution:
    """What one execute request produced on iopub."""

    status: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def of_type(self, *types: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["msg_type"] in types]

    @property
    def stdout(self) -> str:
        return "".join(m["content"]["text"] for m in self.of_type("stream") if m["content"]["name"] == "stdout")

    @property
    def stderr(self) -> str:
        return "".join(m["content"]["text"] for m in self.of_type("stream") if m["content"]["name"] == "stderr")

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [m["content"] for m in self.of_type("error")]

    def texts(self, mime: str = "text/plain") -> list[str]:
        """Every display/update/result payload of ``mime``, in order."""
        return [
            m["content"]["data"][mime]
            for m in self.of_type("display_data", "update_display_data", "execute_result")
            if mime in m["content"].get("data", {})
        ]

    def final_texts(self, mime: str = "text/plain") -> list[str]:
        """Each display's last state (what a saved notebook would show), in display order."""
        shown: dict[str, str] = {}
        order: list[str] = []
        for m in self.of_type("display_data", "update_display_data", "execute_result"):
            data = m["content"].get("data", {})
            key = (m["content"].get("transient") or {}).get("display_id") or m["header"]["msg_id"]
            if key not in shown:
                order.append(key)
            if mime in data:
                shown[key] = data[mime]
        return [shown[k] for k in order if shown.get(k)]


class Kernel:
    """One running kernel with an ``execute`` that collects iopub output."""

    def __init__(self, env: dict[str, str], cwd: str | None = None) -> None:
        # As users have it; a crash prints every thread's stack on the kernel's stderr.
        full_env = {**os.environ, "AGENT_KERNEL_WARM_UP": "1", "PYTHONFAULTHANDLER": "1", **env}
        kwargs: dict[str, Any] = {"env": full_env}
        if cwd:
            kwargs["cwd"] = cwd
        # IPC sockets: a TCP port chosen free can be taken by a kernel another test worker
        # starts before this one binds it ("Address already in use").
        # The socket paths are absolute: the kernel may run in another directory.
        self._checked = 0.0
        self._sockets = tempfile.mkdtemp(prefix="ak-kernel-")
        self.manager = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(self._sockets, "k"))
        # The kernel's own stderr, for the message should it die mid-test.
        self._stderr_path = os.path.join(self._sockets, "stderr")
        self._stderr = open(self._stderr_path, "wb")  # noqa: SIM115 - closed in shutdown()
        self.manager.start_kernel(stderr=self._stderr, **kwargs)
        self.client = self.manager.client()
        self.client.start_channels()
        try:
            self.client.wait_for_ready(timeout=60)
        except RuntimeError:
            self.shutdown()
            raise

    def execute(
        self,
        code: str,
        *,
        timeout: float = 60,
        on_message: Callable[[dict[str, Any], Kernel], None] | None = None,
        allow_stdin: bool = True,
        answer: str | None = None,
        notebook: bool = True,
        cell_id: str | None = None,
    ) -> Execution:
        """Run ``code``; collect its iopub messages until the kernel is idle again.

        ``on_message`` sees every iopub message meanwhile, also those answering comm
        messages (widgets), whose parent is the comm message rather than this request.
        ``allow_stdin=False`` is what nbclient (and so papermill) sends. ``answer`` is typed
        into an input() / getpass prompt if the code asks (an empty line if not given).
        The request names a notebook cell (``cellId``, with ``deletedCells`` and
        ``recordTiming``), as JupyterLab's do; with ``notebook=False`` it does not, as
        jupyter console's do not; ``cell_id`` names it.
        """
        client = self.client
        content = {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": allow_stdin, "stop_on_error": True,
        }  # fmt: skip
        # What JupyterLab's cell executor sends with a cell (nbclient sends only cellId).
        cell = {"cellId": cell_id or uuid.uuid4().hex, "deletedCells": [], "recordTiming": False}
        metadata = cell if notebook else {}
        request = client.session.msg("execute_request", content, metadata=metadata)
        client.shell_channel.send(request)
        msg_id = request["header"]["msg_id"]
        messages: list[dict[str, Any]] = []
        started = time.perf_counter()
        deadline = time.monotonic() + timeout
        while True:
            if allow_stdin and client.stdin_channel.msg_ready():
                request = client.get_stdin_msg(timeout=1)
                messages.append(request)
                client.input(answer if answer is not None else "")
            wait = max(deadline - time.monotonic(), 0.01)
            try:
                message = client.get_iopub_msg(timeout=min(wait, 0.05) if allow_stdin else wait)
            except queue.Empty:
                self._check_alive(code)
                if time.monotonic() < deadline:
                    continue
                raise TimeoutError(f"the cell did not finish within {timeout} s: {code!r}") from None
            own = message["parent_header"].get("msg_id") == msg_id
            if own:
                messages.append(message)
            if on_message is not None:
                on_message(message, self)
            if own and message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                break
        while True:
            reply = client.get_shell_msg(timeout=max(deadline - time.monotonic(), 1))
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        return Execution(reply["content"]["status"], messages, time.perf_counter() - started)

    def _check_alive(self, code: str) -> None:
        """Fail at once, with the kernel's exit status and stderr, if the kernel has died."""
        now = time.monotonic()
        if now - self._checked < 1:
            return
        self._checked = now
        if self.manager.is_alive():
            return
        process = getattr(self.manager.provisioner, "process", None)
        status = process.poll() if process is not None else None
        with open(self._stderr_path, "rb") as f:
            tail = f.read()[-4000:].decode(errors="replace")
        raise RuntimeError(f"the kernel died (exit status {status}) while running {code!r}; its stderr ends:\n{tail}")

    def ok(self, code: str, **kwargs: Any) -> Execution:
        """Execute and fail the test with the kernel's error if the cell failed."""
        result = self.execute(code, **kwargs)
        if result.status != "ok" or result.errors:
            details = "\n".join(e["ename"] + ": " + e["evalue"] for e in result.errors)
            raise AssertionError(f"cell failed ({result.status}): {code!r}\n{details}")
        return result

    def value(self, expression: str) -> Any:
        """The value of a Python literal expression evaluated in the kernel."""
        import ast

        result = self.ok(f"print(repr({expression}))")
        return ast.literal_eval(result.stdout.strip())

    def shutdown(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)
        self._stderr.close()
        shutil.rmtree(self._sockets, ignore_errors=True)
