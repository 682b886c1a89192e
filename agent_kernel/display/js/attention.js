// @ts-check
// What the cards that wait for the person (choice.js, form.js) share, put before their own
// script by display/scripts.py. The JupyterLab extension's dom.ts has the same two steps
// (announce, mayTakeFocus) for what it draws; both use the one live region #ak-announcer.

/**
 * Say `text` through the page's polite live region (made on first use): a screen reader
 * reads it once it is done with what it reads now. Cleared first, so the same sentence
 * twice is said twice.
 * @param {string} text
 */
function announce(text) {
  let region = document.getElementById("ak-announcer");
  if (!region) {
    region = document.createElement("div");
    region.id = "ak-announcer";
    region.className = "ak-visually-hidden";
    region.setAttribute("role", "status");
    region.setAttribute("aria-live", "polite");
    // The extension's stylesheet hides the class; a front end without it gets the same here.
    region.style.cssText =
      "position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;";
    document.body.appendChild(region);
  }
  const said = region;
  said.textContent = "";
  setTimeout(() => {
    said.textContent = text;
  }, 100);
}

/**
 * Whether a card that now waits may take the keyboard focus: not while the person types in
 * another field (a cell's editor, a dialog's input), except the chat's prompt box, whose
 * prompt is what asked.
 */
function mayTakeFocus() {
  const active = /** @type {HTMLElement | null} */ (document.activeElement);
  if (!active || active === document.body || active.closest(".ak-chat-input")) return true;
  const typing =
    active instanceof HTMLInputElement ||
    active instanceof HTMLTextAreaElement ||
    active instanceof HTMLSelectElement ||
    active.isContentEditable;
  return !typing;
}

/**
 * A card that waits for the person: a region named by what it asks, said once through the
 * live region, and given the keyboard focus once it is in the page, unless the person types
 * elsewhere.
 * @param {HTMLElement} card
 * @param {string} label
 */
function waitForPerson(card, label) {
  card.setAttribute("role", "region");
  card.setAttribute("aria-label", label);
  card.tabIndex = -1;
  announce(label + ": waiting for your answer.");
  let tries = 0;
  const focus = () => {
    if (!card.isConnected) {
      if (++tries < 50) setTimeout(focus, 100);
      return;
    }
    if (mayTakeFocus()) card.focus({ preventScroll: true });
  };
  setTimeout(focus, 0);
}

/**
 * The keyboard stays on the card when the control it was on is disabled (an answered card).
 * @param {HTMLElement} card
 */
function keepFocusOn(card) {
  if (card.contains(document.activeElement) && document.activeElement !== card) {
    card.tabIndex = -1;
    card.focus({ preventScroll: true });
  }
}
