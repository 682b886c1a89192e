"""Settings for the kernels agent-kernel starts itself: the demo's and scheduled runs'."""

from __future__ import annotations

import zmq
from traitlets.config import Config


def kernel_manager_config() -> Config:
    """A traitlets ``Config`` that encrypts the kernel's ZeroMQ sockets with CurveZMQ when it can.

    jupyter_client 8.10 provisions CurveZMQ keys only when asked to
    (``KernelManager.transport_encryption``); without keys ipykernel 7.4 warns at every start
    that its TCP sockets carry code and outputs in plain text, and that warning lands in the
    demo's output and in every run's log. ``"auto"`` provisions keys only for kernelspecs that
    declare support, so other kernels start as before; a libzmq built without curve gets an
    empty config.
    """
    config = Config()
    if zmq.has("curve"):
        config.KernelManager.transport_encryption = "auto"
    return config
