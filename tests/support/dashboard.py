"""The Agent dashboard (the left sidebar: sessions, jobs, runs, stats) and the chat's own
sidebar in the browser tests: opening the dashboard, and measuring that no control of
either is clipped."""

from __future__ import annotations

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

DASHBOARD = "#agent-kernel-dashboard"
DASHBOARD_TAB = ".jp-SideBar [data-id='agent-kernel-dashboard']"


def open_dashboard(page):
    """Bring the Agent dashboard forward (its sidebar tab) and return it."""
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.commands.hasCommand('agent-kernel:show-dashboard')",
        timeout=60_000,
    )
    dashboard = page.locator(DASHBOARD)
    for _ in range(3):  # the workspace's restored layout may hide it once more after the command
        page.evaluate(
            "async () => { await window.jupyterapp.restored;"
            " await window.jupyterapp.commands.execute('agent-kernel:show-dashboard'); }"
        )
        try:
            dashboard.wait_for(state="visible", timeout=15_000)
            return dashboard
        except PlaywrightTimeoutError:
            continue
    dashboard.wait_for(state="visible", timeout=15_000)
    return dashboard


# Every visible control under the root (selects, buttons, inputs, chips, the faces of the
# compact selects): its visible label (a select's chosen option, a button's text, a face's text) measured in the control's own font, plus its
# padding and a native select's arrow, against the control's width; content wider than the
# box (scrollWidth); a control's box past the root's edges; text cut with an ellipsis.
MEASURE = """(root) => {
  const panel = document.querySelector(root);
  const edge = panel.getBoundingClientRect();
  const ctx = document.createElement('canvas').getContext('2d');
  const textWidth = (node, text) => {
    const cs = getComputedStyle(node);
    ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
    return ctx.measureText(text).width;
  };
  const controls = [], problems = [];
  for (const node of panel.querySelectorAll('select, button, input, textarea, .ak-chip, .ak-select-face')) {
    const box = node.getBoundingClientRect();
    if (!node.checkVisibility() || box.width === 0) continue;
    const cs = getComputedStyle(node);
    // A select laid transparent over its face (an icon, the short text of its choice): the
    // face is measured, the select only against the panel's edges.
    const overlaid = node.tagName === 'SELECT' && cs.opacity === '0';
    const px = v => parseFloat(v) || 0;
    const chrome = px(cs.paddingLeft) + px(cs.paddingRight) + px(cs.borderLeftWidth) + px(cs.borderRightWidth);
    let label = '';
    if (node.tagName === 'SELECT' && !overlaid) label = node.selectedOptions[0]?.textContent ?? '';
    else if (node.tagName === 'BUTTON' || node.classList.contains('ak-select-face')) label = node.textContent.trim();
    const arrow = node.tagName === 'SELECT' && cs.appearance !== 'none' ? 16 : 0;
    const needed = label ? textWidth(node, label) + chrome + arrow : 0;
    const owner = node.classList.contains('ak-select-face') ? node.parentElement.querySelector('select') : node;
    const name = (owner.getAttribute('aria-label') || label || node.title || node.className) + (owner === node ? '' : ' (shown)');
    controls.push({ name, tag: node.tagName, label, width: box.width, needed });
    if (needed > box.width + 1) problems.push(`${name}: ${Math.round(box.width)} px wide, its label "${label}" needs ${Math.round(needed)}`);
    if (node.tagName !== 'TEXTAREA' && node.tagName !== 'INPUT' && node.scrollWidth > node.clientWidth + 1)
      problems.push(`${name}: its content is ${node.scrollWidth} px in a ${node.clientWidth} px box`);
    if (box.left < edge.left - 1 || box.right > edge.right + 1)
      problems.push(`${name}: ${Math.round(box.left)}..${Math.round(box.right)} px is past the panel's ${Math.round(edge.left)}..${Math.round(edge.right)}`);
  }
  for (const node of panel.querySelectorAll('*')) {
    if (node.checkVisibility() && getComputedStyle(node).textOverflow === 'ellipsis' && node.scrollWidth > node.clientWidth + 1)
      problems.push(`"${node.textContent.slice(0, 60)}" is cut with an ellipsis`);
  }
  if (panel.scrollWidth > panel.clientWidth + 1) problems.push(`the panel scrolls sideways (${panel.scrollWidth} > ${panel.clientWidth})`);
  return { controls, problems, width: edge.width };
}"""


def measure(page, root: str) -> dict:
    """The controls under ``root`` with their widths, and what is clipped (``problems``)."""
    return page.evaluate(MEASURE, root)
