"""axe-core (Deque's accessibility engine, a devDependency of labextension/) run in a
Playwright page: the WCAG 2.1 A and AA rules over the parts of the page a test names.

The engine's script is read from labextension/node_modules (``make install`` runs jlpm
there) and put into the page with ``add_script_tag``: nothing is fetched from the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

AXE_JS = Path(__file__).resolve().parents[2] / "labextension" / "node_modules" / "axe-core" / "axe.min.js"

WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

# Runs axe over the elements the selectors match (those present), WCAG 2.1 A/AA rules only.
_RUN = """async ([include, tags]) => {
  const present = include.filter(selector => document.querySelector(selector));
  if (!present.length) return {missing: include, violations: []};
  const result = await window.axe.run(
    {include: present.map(selector => [selector])},
    {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']}
  );
  return {
    missing: include.filter(selector => !present.includes(selector)),
    violations: result.violations.map(v => ({
      id: v.id, impact: v.impact, help: v.help,
      targets: v.nodes.map(n => ({target: n.target.join(' '), summary: n.failureSummary, html: n.html.slice(0, 200)}))
    }))
  };
}"""


@dataclass(frozen=True)
class Violation:
    """One rule broken, with where (CSS selectors of the offending elements)."""

    rule: str
    impact: str
    help: str
    targets: list[dict[str, str]]

    def __str__(self) -> str:
        where = "; ".join(f"{t['target']} ({t['html']})" for t in self.targets[:5])
        return f"[{self.impact}] {self.rule}: {self.help} at {where}"


def axe_violations(page: Any, *include: str) -> list[Violation]:
    """The WCAG 2.1 A/AA violations axe-core finds within the elements ``include`` selects.

    Every selector must match something: a surface that is not on the page is a failure
    here (a test that checked nothing would pass), not a silent pass."""
    if not AXE_JS.exists():
        raise FileNotFoundError(f"{AXE_JS} is missing: run `make install` (jlpm installs axe-core)")
    if not page.evaluate("() => Boolean(window.axe)"):
        page.add_script_tag(path=str(AXE_JS))
    found = page.evaluate(_RUN, [list(include), WCAG_21_AA])
    if found["missing"]:
        raise AssertionError(f"not on the page, so not checked: {found['missing']}")
    return [Violation(v["id"], v["impact"] or "", v["help"], v["targets"]) for v in found["violations"]]


def serious(violations: list[Violation]) -> list[Violation]:
    """The violations axe rates serious or critical."""
    return [v for v in violations if v.impact in ("serious", "critical")]


# What the keyboard's focus looks like: a visible outline or box-shadow on the focused element.
FOCUS_SHOWN = """() => {
  let node = document.activeElement;
  while (node && node.shadowRoot && node.shadowRoot.activeElement) node = node.shadowRoot.activeElement;
  if (!node || node === document.body) return {shown: false, what: 'the page (body)'};
  const style = getComputedStyle(node);
  const outline = style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0;
  const shadow = style.boxShadow && style.boxShadow !== 'none';
  const what = node.tagName.toLowerCase() + (node.className && typeof node.className === 'string'
    ? '.' + node.className.trim().split(/\\s+/).join('.') : '') +
    (node.getAttribute('aria-label') ? `[aria-label="${node.getAttribute('aria-label')}"]` : '') +
    ` "${(node.textContent || '').trim().slice(0, 40)}"`;
  return {shown: Boolean(outline || shadow), what, outline: `${style.outlineStyle} ${style.outlineWidth}`,
          shadow: style.boxShadow};
}"""


def focus_shown(page: Any) -> dict[str, Any]:
    """What has the keyboard focus and whether it shows it (``shown``): an outline or box-shadow."""
    result: dict[str, Any] = page.evaluate(FOCUS_SHOWN)
    return result
