"""What to type to install an optional part: the packages of one of agent-kernel's extras.

agent-kernel is not on the package index, so ``pip install 'agent-kernel[dask]'`` finds
nothing, and the wheel or checkout it was installed from may be gone. A hint that installs
an extra therefore names the extra's packages, read from the installed metadata (so it
follows ``pyproject.toml``), with the caller's list when the metadata cannot say.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata

__all__ = ["extra_requirements", "install_command"]


def extra_requirements(extra: str) -> list[str]:
    """The requirements the installed agent-kernel lists for ``extra`` (empty when unknown)."""
    try:
        requires = metadata.requires("agent-kernel") or []
    except metadata.PackageNotFoundError:
        return []
    marker = (f"extra == '{extra}'", f'extra == "{extra}"')
    return [r.split(";", 1)[0].strip() for r in requires if r.split(";", 1)[-1].strip() in marker]


def install_command(extra: str, fallback: Sequence[str]) -> str:
    """``pip install 'pkg>=x' ...`` for the packages of ``extra`` (``fallback`` when unknown)."""
    packages = extra_requirements(extra) or list(fallback)
    return "pip install " + " ".join(f"'{p}'" for p in packages)
