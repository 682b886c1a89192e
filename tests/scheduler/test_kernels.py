"""Kernels agent-kernel starts itself (demo, scheduled runs) encrypt their sockets when they can."""

from __future__ import annotations

import subprocess

import pytest
import zmq
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from agent_kernel.scheduler.kernels import kernel_manager_config


def _declares_curve(kernel_name: str) -> bool:
    metadata = KernelSpecManager().get_kernel_spec(kernel_name).metadata or {}
    return "curve" in (metadata.get("supported_encryption") or [])


curve_kernel = pytest.mark.skipif(
    not (zmq.has("curve") and _declares_curve("python3")),
    reason="needs libzmq with curve and a kernelspec declaring it (ipykernel >= 7.4)",
)


def _stderr_of_a_kernel(tmp_path, **manager_args) -> tuple[str, dict]:
    """Start python3, run one statement, stop it; return its stderr and connection info."""
    manager = KernelManager(kernel_name="python3", **manager_args)
    log = tmp_path / "kernel-stderr.log"
    with open(log, "w") as stderr:
        manager.start_kernel(cwd=str(tmp_path), stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        info = manager.get_connection_info()
        client = manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=60)
        reply = client.execute_interactive("x = 6 * 7", timeout=30)
        assert reply["content"]["status"] == "ok"
        client.stop_channels()
    finally:
        manager.shutdown_kernel(now=True)
    return log.read_text(), info


@curve_kernel
def test_the_kernel_gets_curve_keys_answers_and_does_not_warn(tmp_path):
    stderr, info = _stderr_of_a_kernel(tmp_path, config=kernel_manager_config())
    assert info.get("curve_publickey") and info.get("curve_secretkey")
    assert "without encryption" not in stderr


@curve_kernel
def test_without_the_config_the_same_kernel_warns(tmp_path):
    """The check above can fail: started the plain way, the same kernel prints the warning."""
    stderr, info = _stderr_of_a_kernel(tmp_path)
    assert not info.get("curve_secretkey")
    assert "without encryption" in stderr
