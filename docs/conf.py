"""Sphinx configuration of agent-kernel's documentation (``make docs``).

Pages are MyST Markdown; the settings reference is generated from the ``AgentKernel``
traits (``_ext/traitlets_settings.py``), the layout in the contributing guide from the modules'
docstrings (``_ext/module_layout.py``); the notebooks in ``notebooks/`` are executed
offline with the scripted model at build time (``_ext/executed_notebooks.py``) and rendered
with their outputs by myst-nb. Nothing is fetched from the network.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "agent-kernel"
author = "agent-kernel contributors"
copyright = "agent-kernel contributors"

extensions = [
    "myst_nb",  # MyST Markdown pages and .ipynb notebooks (myst-parser comes with it)
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # the docstrings' "Args:" sections
    "traitlets_settings",
    "executed_notebooks",
    "module_layout",
]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
root_doc = "index"
# Flags and code-like text (--token-limit, 'auto') stay as written.
smartquotes = False

# MyST: GitHub-style anchors for headings, so links such as security.md#secrets work on
# GitHub and here alike.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# The notebooks are executed by executed_notebooks (papermill, the scripted model), not by myst-nb.
nb_execution_mode = "off"
nb_merge_streams = True

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_default_options: dict[str, object] = {}  # each directive in api.md names what it shows
napoleon_google_docstring = True
napoleon_numpy_docstring = True  # Agent's "Parameters" section

# Every cross-reference must resolve (make test builds with -n -W). References to other
# projects (no intersphinx: the build is offline) and to the internal packages, which are
# not documented on purpose (contributing.md says which they are), are not checked.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(?!agent_kernel\b).*"),
    (r"py:.*", r"agent_kernel\.(magics|turn|model|kernel|sql|store|tools|display|scheduler|server)\b.*"),
    (r"py:.*", r"agent_kernel\.(secrets|redaction|credentials|untrusted|paths|cli|demo)\b.*"),
    (r"py:.*", r"agent_kernel\.testing\.(script|server|cache|batches|demo)\b.*"),
]
# The turn's own MIME type is for the JupyterLab extension; the page shows its HTML beside it.
suppress_warnings = ["mystnb.unknown_mime_type"]

html_theme = "pydata_sphinx_theme"
html_title = "agent-kernel"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
# Only the user guide has sections of its own; other pages get the whole width.
html_sidebars = {page: [] for page in ("index", "install", "settings", "api", "security", "performance", "contributing", "examples/*")}
html_show_sourcelink = False
html_copy_source = False
