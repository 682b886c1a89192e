"""The agent's browser: Playwright driving the system's Chromium, one profile per session.

Playwright's sync API cannot run on the kernel's asyncio thread, so every browser call
runs on one dedicated thread (a single-worker executor); a tool awaits its future.
Each agent session gets its own Chromium process with a fresh profile directory
(``launch_persistent_context``), closed and deleted by ``browser_close``, when the
session ends (:meth:`Driver.end_session`: the agent moves to another session, a
sub-session finishes), when it has been idle for :data:`IDLE_CLOSE_S`, and at exit.

What keeps the page inside the user's rules (see docs/guide/web.md):

- every request goes through :class:`~agent_kernel.tools.browser_proxy.Proxy`, which
  checks its address like ``fetch_url`` and connects to exactly that address;
  ``--proxy-bypass-list=<-loopback>`` keeps Chromium from sending loopback around it;
- ``--force-webrtc-ip-handling-policy=disable_non_proxied_udp`` keeps WebRTC off UDP,
  QUIC is off, service workers are blocked and downloads refused;
- a ``route`` on the context refuses any request whose scheme is not http(s).
"""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agent_kernel.extras import install_command
from agent_kernel.tools.browser_proxy import Proxy

__all__ = ["DRIVER", "BrowserMissing", "Driver", "Session", "chromium_path"]

T = TypeVar("T")

IDLE_CLOSE_S = 15 * 60.0  # a session's browser unused this long is closed
PROFILE_PREFIX = "agent-kernel-browser-"
VIEWPORT = {"width": 1280, "height": 800}
CHROMIUM_ARGS = [
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--proxy-bypass-list=<-loopback>",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
]


class BrowserMissing(RuntimeError):
    """Playwright or Chromium is not installed."""


def chromium_path() -> str:
    """The Chromium to drive: ``$CHROMIUM``, else the one ``make install`` installs."""
    return os.environ.get("CHROMIUM") or "/usr/bin/chromium"


@dataclass
class Session:
    """One agent session's browser: its context (and Chromium process), page, profile and proxy."""

    context: Any
    page: Any
    profile: Path
    proxy: Proxy
    downloads: list[str] = field(default_factory=list)
    used: float = field(default_factory=time.monotonic)


class _Thread:
    """One daemon thread running the calls handed to it, in order.

    Not a ``ThreadPoolExecutor``: the interpreter stops those before ``atexit`` handlers
    run, and the handler that closes the browsers needs this thread still running.
    """

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="agent-kernel-browser", daemon=True).start()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._calls.put((fn, future))
        return future

    def stop(self) -> None:
        self._calls.put(None)

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            fn, future = call
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)


class Driver:
    """Runs every browser call on one thread; holds each session's browser."""

    def __init__(self) -> None:
        self._executor: _Thread | None = None
        self._playwright: Any = None
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` on the browser thread."""
        with self._lock:
            if self._executor is None:
                self._executor = _Thread()
            return self._executor.submit(fn)

    # -- on the browser thread ---------------------------------------------------------

    def session(self, session_id: str, allow: Callable[[], list[str]], page_bytes: int) -> Session:
        """The session's browser, started on first use (and idle ones closed)."""
        self._close_idle(keep=session_id)
        found = self._sessions.get(session_id)
        if found is not None and not found.page.is_closed():
            found.used = time.monotonic()
            found.proxy.page_bytes = page_bytes
            return found
        if found is not None:
            self.close(session_id)
        made = self._launch(allow, page_bytes)
        self._sessions[session_id] = made
        return made

    def _launch(self, allow: Callable[[], list[str]], page_bytes: int) -> Session:
        executable = chromium_path()
        if not (Path(executable).exists() or shutil.which(executable)):
            raise BrowserMissing(
                f"The browser tools need Chromium, and there is none at {executable}: run `make install` "
                "(it installs Debian's chromium), or point the CHROMIUM environment variable at one."
            )
        if self._playwright is None:
            try:
                from playwright.sync_api import sync_playwright  # noqa: PLC0415 - optional dependency (the browser extra)
            except ImportError:
                raise BrowserMissing(
                    f"The browser tools need Playwright: {install_command('browser', ['playwright>=1.45'])}."
                ) from None
            self._playwright = sync_playwright().start()
        proxy = Proxy(allow, page_bytes=page_bytes)
        port = proxy.start()
        profile = Path(tempfile.mkdtemp(prefix=PROFILE_PREFIX))
        args = [*CHROMIUM_ARGS, f"--proxy-server=http://127.0.0.1:{port}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses its sandbox to root
        try:
            context = self._playwright.chromium.launch_persistent_context(
                str(profile),
                executable_path=executable,
                headless=True,
                args=args,
                accept_downloads=False,
                service_workers="block",
                viewport=VIEWPORT,
                downloads_path=str(profile / "downloads"),
            )
        except Exception:
            proxy.close()
            shutil.rmtree(profile, ignore_errors=True)
            raise
        context.route("**/*", _only_web_schemes)
        page = context.pages[0] if context.pages else context.new_page()
        made = Session(context, page, profile, proxy)
        page.on("download", lambda download: _refuse_download(made, download))
        return made

    def page_url(self, session_id: str) -> str | None:
        """The URL of the session's open page, if it has a browser (never starts one)."""
        found = self._sessions.get(session_id)
        return None if found is None or found.page.is_closed() else str(found.page.url)

    def close(self, session_id: str) -> bool:
        """Close the session's browser and delete its profile; whether it had one."""
        found = self._sessions.pop(session_id, None)
        if found is None:
            return False
        with suppress(Exception):  # the process may be gone already
            found.context.close()
        found.proxy.close()
        shutil.rmtree(found.profile, ignore_errors=True)
        return True

    def end_session(self, session_id: str) -> None:
        """The agent session ended: close its browser, if it has one, without waiting (from any
        thread; nothing starts when the browser was never used)."""
        with self._lock:
            executor = self._executor
        if executor is not None:
            executor.submit(lambda: self.close(session_id))

    def _close_idle(self, keep: str) -> None:
        now = time.monotonic()
        for session_id, found in list(self._sessions.items()):
            if session_id != keep and now - found.used > IDLE_CLOSE_S:
                self.close(session_id)

    def close_all(self) -> None:
        for session_id in list(self._sessions):
            self.close(session_id)
        if self._playwright is not None:
            with suppress(Exception):  # its driver process may be gone already
                self._playwright.stop()
            self._playwright = None

    def shutdown(self) -> None:
        """Close every browser (on the browser thread) and stop the thread; at exit."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is None:
            return
        profiles = [found.profile for found in list(self._sessions.values())]
        with suppress(Exception):  # exiting anyway
            executor.submit(self.close_all).result(timeout=20)
        executor.stop()
        for profile in profiles:
            shutil.rmtree(profile, ignore_errors=True)


def _only_web_schemes(route: Any) -> None:
    url = route.request.url
    if url.split(":", 1)[0].lower() in ("http", "https"):
        route.continue_()
    else:
        route.abort("blockedbyclient")


def _refuse_download(session: Session, download: Any) -> None:
    session.downloads.append(download.url)
    with suppress(Exception):  # already refused by accept_downloads=False
        download.cancel()


DRIVER = Driver()
atexit.register(DRIVER.shutdown)
