"""Where ``run_code(isolated=True)`` runs: a bubblewrap sandbox when this machine has one.

Two modes, decided once per process (the tool's description depends on it and must not
change between turns, since tools are part of the cached prompt prefix):

- ``sandbox`` (Linux with bubblewrap, ``bwrap``, and user namespaces allowed): the code
  runs in new user, PID, network, IPC, UTS and cgroup namespaces. Its ``/proc`` shows
  only its own processes, so the kernel's environment and memory
  (``/proc/<pid>/environ``, ``/proc/<pid>/mem``) are out of reach; the file system is
  empty apart from read-only ``/usr`` (and ``/lib*``, ``/bin``), a few files of ``/etc``,
  the Python installation and its import paths, a private ``/tmp`` and its own working
  directory. The agent's data directory and the directory of its DuckDB file are
  covered by empty ``tmpfs`` mounts should they lie inside one of those paths. There is
  no network.
- ``process`` (anything else, or ``AGENT_KERNEL_ISOLATION=process``): a separate Python
  process with a stripped environment. It is **not a sandbox**: it runs as the same user
  and can read whatever that user can, the kernel's ``/proc`` entries included.

Whether the sandbox works is found out by trying it once: containers often forbid the
user namespaces it needs even when ``bwrap`` is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from agent_kernel.paths import agent_home, default_db_path

SANDBOX, PROCESS = "sandbox", "process"
MODE_ENV = "AGENT_KERNEL_ISOLATION"  # "auto" (default) or "process" (never sandbox)
_PROBE_TIMEOUT_S = 15.0

# Only what a plain Python needs: no API keys, no tokens, no agent settings.
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT", "TMPDIR")
# /etc entries a Python program may read (dynamic linker, time zone, certificates, fonts).
_ETC = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "ssl", "ca-certificates",
    "alternatives", "fonts", "mime.types", "nsswitch.conf", "passwd", "group", "hosts",
)  # fmt: skip

_SANDBOX_TEXT = (
    "It runs in a bubblewrap sandbox: no network; no access to the kernel (processes, "
    "environment, memory), the user's files or the agent's database; only Python, its "
    "packages (read-only) and a temporary directory."
)
_PROCESS_TEXT = (
    "It runs in a separate Python process with a stripped environment (no API keys); "
    "this is a separate process, not a sandbox: it can read the user's files."
)


@dataclass(frozen=True)
class Isolation:
    """How isolated code runs on this machine."""

    mode: str
    reason: str = ""  # why there is no sandbox (empty in sandbox mode)
    bwrap: str | None = None
    python_paths: tuple[str, ...] = field(default=())

    @property
    def sandboxed(self) -> bool:
        return self.mode == SANDBOX

    def describe(self) -> str:
        """The sentence the model reads in ``run_code``'s description."""
        return _SANDBOX_TEXT if self.sandboxed else _PROCESS_TEXT

    def command(self, argv: list[str], workdir: str) -> list[str]:
        """``argv`` (a Python command line) wrapped so it runs isolated in ``workdir``."""
        if not self.sandboxed:
            return argv
        assert self.bwrap is not None
        return [self.bwrap, *_bwrap_options(self.python_paths, workdir, _hidden_dirs()), *argv]

    def environment(self, workdir: str) -> dict[str, str]:
        """The environment of the isolated process: a few locale and path variables."""
        env = {k: v for k, v in os.environ.items() if k in KEPT_ENV}
        env["HOME"] = env["TMPDIR"] = workdir  # the sandbox's own /tmp is not the host's
        return env


@lru_cache(maxsize=1)
def isolation() -> Isolation:
    """This process's isolation, probed on first use and then kept."""
    return probe()


def probe(mode: str | None = None) -> Isolation:
    """Find out whether the sandbox works here by running Python in it once."""
    wanted = (mode or os.environ.get(MODE_ENV) or "auto").strip().lower()
    if wanted == PROCESS:
        return Isolation(PROCESS, reason=f"{MODE_ENV}=process")
    if not sys.platform.startswith("linux"):
        return Isolation(PROCESS, reason=f"no sandbox on {sys.platform}")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Isolation(PROCESS, reason="bubblewrap (bwrap) is not installed")
    try:
        paths = _python_paths()
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return Isolation(PROCESS, reason=f"could not inspect Python: {exc}")
    candidate = Isolation(SANDBOX, bwrap=bwrap, python_paths=paths)
    check = "import os; print('ok', os.getpid())"
    try:
        with tempfile.TemporaryDirectory(prefix="agent-kernel-probe-") as tmp:
            workdir = os.path.realpath(tmp)
            done = subprocess.run(
                candidate.command([sys.executable, "-I", "-c", check], workdir),
                capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, env=candidate.environment(workdir),
                cwd=workdir,
            )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return Isolation(PROCESS, reason=f"bwrap did not run: {exc}")
    if done.returncode != 0 or not done.stdout.startswith("ok "):
        error = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return Isolation(PROCESS, reason=f"bwrap does not work here: {error}")
    return candidate


def _python_paths() -> tuple[str, ...]:
    """What ``python -I`` needs to start and import installed packages (real paths)."""
    show = "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.path]))"
    shown = subprocess.run(
        [sys.executable, "-I", "-c", show],
        capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=True, env={"PATH": os.environ.get("PATH", "")},
    )  # fmt: skip
    prefix, base, exec_prefix, path = json.loads(shown.stdout)
    candidates = [prefix, base, exec_prefix, os.path.dirname(sys.executable), *path]
    found: list[str] = []
    for entry in candidates:
        if not entry:
            continue
        real = os.path.realpath(entry)
        if os.path.exists(real) and real not in found and not real.startswith("/usr/"):
            found.append(real)
    # A symlinked interpreter (a venv's bin/python) must resolve inside the sandbox too.
    for link in (sys.executable, os.path.realpath(sys.executable)):
        parent = os.path.dirname(link)
        if parent not in found and not parent.startswith("/usr/"):
            found.append(parent)
    return tuple(found)


def _hidden_dirs() -> list[str]:
    """The agent's data directory and its DuckDB file's directory (real paths)."""
    hidden = []
    for path in (default_db_path().parent, agent_home()):
        real = os.path.realpath(path)
        if real not in hidden:
            hidden.append(real)
    return hidden


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _bwrap_options(python_paths: tuple[str, ...], workdir: str, hidden: list[str]) -> list[str]:
    options = [
        "--unshare-all",  # user, pid, net, ipc, uts, cgroup namespaces
        "--die-with-parent",
        "--new-session",
        "--ro-bind", "/usr", "/usr",
        "--proc", "/proc",
        "--dev", "/dev",
        "--tmpfs", "/tmp",
    ]  # fmt: skip
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        top = Path("/", name)
        if top.is_symlink():
            options += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            options += ["--ro-bind", str(top), str(top)]
    for name in _ETC:
        options += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for path in python_paths:
        options += ["--ro-bind", path, path]
    roots = ["/usr", "/tmp", *python_paths]
    for secret in hidden:
        if any(_inside(secret, root) for root in roots) and os.path.isdir(secret):
            options += ["--tmpfs", secret]
    # Python paths inside a hidden directory come back, unless they hold it themselves.
    for path in python_paths:
        if any(_inside(path, secret) for secret in hidden) and not any(_inside(secret, path) for secret in hidden):
            options += ["--ro-bind", path, path]
    options += ["--bind", workdir, workdir, "--chdir", workdir]
    return options
