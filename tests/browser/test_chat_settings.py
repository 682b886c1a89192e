"""The Agent chat's settings row in a real JupyterLab 4 with Chromium: its choices are the
notebook's defaults in the kernel for the next turn from the panel or a cell, the models
are the configured ones, a choice the kernel refuses is a line in the panel, the context
meter shows the model's window, the cost and where compaction starts, and the row reads
well in the high-contrast theme (in JupyterLab and in Notebook 7's right sidebar).

Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import json

import pytest

from agent_kernel.testing import say
from tests.support.browser import (
    cell,
    notebook_7_chat,
    open_chat,
    run_cell,
    run_notebook,
    save_screenshot,
    send,
    wait_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

HIGH_CONTRAST = "JupyterLab Dark High Contrast"

# WCAG contrast of each element's text over the first opaque background behind it, and
# whether any stylesheet rule of the extension (.ak-*) writes a colour as a literal.
CONTRAST = """(selectors) => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = node => {
    for (let n = node; n; n = n.parentElement) {
      const c = rgb(getComputedStyle(n).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) { return c.slice(0, 3); }
    }
    return [255, 255, 255];
  };
  const found = {};
  for (const selector of selectors) {
    const node = document.querySelector(selector);
    if (!node) { found[selector] = null; continue; }
    const fg = rgb(getComputedStyle(node).color).slice(0, 3), bg = background(node);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    found[selector] = { ratio: (hi + 0.05) / (lo + 0.05), fg, bg };
  }
  const literal = [];
  for (const sheet of document.styleSheets) {
    let rules = [];
    try { rules = [...sheet.cssRules]; } catch { continue; }
    for (const rule of rules) {
      if (rule.selectorText && rule.selectorText.includes('.ak-') && /#[0-9a-f]{3,8}\\b|rgba?\\(|hsla?\\(/i.test(rule.style.cssText)) {
        literal.push(rule.cssText);
      }
    }
  }
  return { found, literal };
}"""
ROW = [
    "#agent-kernel-panel .ak-chat-meter",
    "#agent-kernel-panel .ak-chat-model",
    "#agent-kernel-panel .ak-chat-approve",
    "#agent-kernel-panel .ak-chat-think",
    "#agent-kernel-panel .ak-chat-session",
    "#agent-kernel-panel .ak-chat-approve-note",
    "#agent-kernel-panel .ak-chat-status",
]


def change_theme(page, theme: str) -> None:
    page.evaluate(f"() => window.jupyterapp.commands.execute('apputils:change-theme', {{theme: {theme!r}}})")
    page.wait_for_function(f"() => document.body.dataset.jpThemeName === {theme!r}", timeout=30_000)
    page.wait_for_timeout(500)


def assert_readable(page) -> None:
    """Every part of the settings row is text of at least 4.5:1 contrast (WCAG AA) over its
    background, and the extension's rules name colours only through theme variables."""
    checked = page.evaluate(CONTRAST, ROW)
    assert checked["literal"] == []
    for selector, found in checked["found"].items():
        assert found is not None, f"{selector} is not in the panel"
        assert found["fg"] != found["bg"] and found["ratio"] >= 4.5, (selector, found)


def test_the_rows_choices_are_the_notebooks_defaults_for_a_cell_too(lab_page, jupyterlab, lab_model):
    page = lab_page
    run_notebook(page, jupyterlab, "chat-settings", ["%load_ext agent_kernel"])
    wait_idle(page)
    chat = open_chat(page)
    lab_model.add(say("First answer."))
    send(chat, "hello from the panel")
    chat.get_by_text("First answer.").wait_for(timeout=60_000)
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=30_000)
    # The meter: tokens of the model's window, the cost, where compaction starts and what it drops.
    meter = chat.locator(".ak-chat-meter")
    meter.filter(has_text="of 200,000 tokens").wait_for(timeout=30_000)
    assert "compacts at 140,000" in meter.inner_text()
    title = meter.get_attribute("title") or ""
    assert "context window" in title and "Session so far" in title
    assert title.index("images") < title.index("shortened") < title.index("summarised")
    # The models are the configured ones, named by the kernel.
    model = chat.locator(".ak-chat-model")
    options = model.locator("option").all_inner_texts()
    assert "claude-haiku-4-5" in options and "claude-opus-5-5" in options
    assert options[0].endswith(" (default)")
    model.select_option("claude-haiku-4-5")
    chat.locator(".ak-chat-think").select_option("low")
    status = chat.locator(".ak-chat-status")
    status.filter(has_text="Settings apply to the next turn").wait_for(timeout=30_000)
    # A cell's turn takes them and says where they came from; a flag on the cell wins.
    lab_model.add(say("From the cell."))
    out = run_cell(page, "%agent answer from a cell", 1)
    cell(page, 1).get_by_text("From the cell.").wait_for(timeout=60_000)
    text = cell(page, 1).inner_text()
    assert "From the Agent chat's settings: --model claude-haiku-4-5, --think low" in text, text
    assert lab_model.requests[-1]["model"] == "claude-haiku-4-5"
    assert out.count() >= 1
    wait_idle(page)
    lab_model.add(say("Flag wins."))
    run_cell(page, "%agent --model claude-from-a-flag the flag wins", 2)
    cell(page, 2).get_by_text("Flag wins.").wait_for(timeout=60_000)
    assert lab_model.requests[-1]["model"] == "claude-from-a-flag"
    assert "From the Agent chat's settings: --think low (a flag" in cell(page, 2).inner_text()
    wait_idle(page)
    # A choice the kernel refuses (a model no longer configured) is a line in the panel.
    run_cell(page, "%config AgentKernel.large_model = 'claude-larger'\nprint('reconfigured')", 3)
    wait_idle(page)
    model.select_option("claude-opus-5-5")
    status.filter(has_text="Not applied: 'claude-opus-5-5' is not a configured model").wait_for(timeout=30_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.ak-chat-model option')].some(o => o.value === 'claude-larger')",
        timeout=30_000,
    )
    assert model.input_value() == "claude-haiku-4-5"  # what the kernel kept
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0


def test_the_row_reads_well_in_the_high_contrast_theme(lab_page, jupyterlab, lab_model):
    page = lab_page
    run_notebook(page, jupyterlab, "chat-contrast", ["%load_ext agent_kernel"])
    wait_idle(page)
    chat = open_chat(page)
    lab_model.add(say("Answered in every theme."))
    send(chat, "hello")
    chat.get_by_text("Answered in every theme.").wait_for(timeout=60_000)
    chat.locator(".ak-chat-meter").filter(has_text="compacts at").wait_for(timeout=30_000)
    try:
        for theme in ("JupyterLab Light", "JupyterLab Dark", HIGH_CONTRAST):
            change_theme(page, theme)
            assert_readable(page)
        save_screenshot(page.locator("#agent-kernel-panel"), "chat-settings-high-contrast.png", readme=True)
    finally:
        change_theme(page, "JupyterLab Light")


def test_the_row_reads_well_in_notebook_7s_right_sidebar(chromium, lab_model, tmp_path):
    # Notebook 7 reads the theme from the same settings as JupyterLab (it has no window.jupyterapp).
    themes = tmp_path / "jupyter-home" / "lab-settings" / "@jupyterlab" / "apputils-extension"
    themes.mkdir(parents=True)
    (themes / "themes.jupyterlab-settings").write_text(json.dumps({"theme": HIGH_CONTRAST}))
    with notebook_7_chat(chromium, lab_model, tmp_path, "%load_ext agent_kernel") as (page, _chat):
        assert page.evaluate("() => Boolean(document.querySelector('#agent-kernel-panel').closest('#jp-right-stack'))")
        page.wait_for_function(f"() => document.body.dataset.jpThemeName === {HIGH_CONTRAST!r}", timeout=30_000)
        page.wait_for_function(
            "() => [...document.querySelectorAll('.ak-chat-model option')].some(o => o.value === 'claude-haiku-4-5')",
            timeout=60_000,
        )
        assert_readable(page)
        save_screenshot(page.locator("#agent-kernel-panel"), "chat-settings-high-contrast-notebook7.png", readme=True)
