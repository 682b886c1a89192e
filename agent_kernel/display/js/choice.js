// @ts-check
// A card that asks one thing: buttons to choose from, or a text box with a Send button.
// Used for ask_user, approvals of writing tools and Continue at the token limit.
/** @param {RenderProps} props */
function render({ model, el }) {
  const card = document.createElement("div");
  card.className = "ak-card ak-choice";
  const heading = model.get("heading");
  if (heading) {
    const h = document.createElement("h4");
    h.textContent = heading;
    card.appendChild(h);
  }
  const text = model.get("text");
  if (text) {
    const p = document.createElement("div");
    p.className = "ak-text";
    p.style.whiteSpace = "pre-wrap";
    p.style.marginBottom = "6px";
    p.textContent = text;
    card.appendChild(p);
  }
  const code = model.get("code");
  if (code) {
    const pre = document.createElement("pre");
    pre.textContent = code;
    card.appendChild(pre);
  }
  let box = null;
  if (model.get("free_text")) {
    box = document.createElement("textarea");
    box.className = "ak-answer";
    box.rows = 2;
    box.placeholder = model.get("placeholder") || "";
    box.style.width = "100%";
    box.style.boxSizing = "border-box";
    card.appendChild(box);
  }
  const buttons = document.createElement("div");
  buttons.className = "ak-buttons";
  const status = document.createElement("div");
  status.className = "ak-status";
  status.setAttribute("role", "status");
  const all = [];
  function disable(label) {
    keepFocusOn(card);
    for (const node of all) node.disabled = true;
    if (box) box.disabled = true;
    if (label) status.textContent = label;
  }
  for (const spec of model.get("buttons")) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "ak-button" + (spec.style ? ` ak-${spec.style}` : "");
    button.textContent = spec.label;
    button.dataset.choice = spec.id;
    button.addEventListener("click", () => {
      if (spec.id === "send") {
        if (!box || !box.value.trim()) {
          status.textContent = "Type an answer first.";
          return;
        }
        disable("Sent.");
        model.send({ type: "text", text: box.value });
      } else {
        disable(`${spec.label}.`);
        model.send({ type: "choice", choice: spec.id });
      }
    });
    all.push(button);
    buttons.appendChild(button);
  }
  if (box) {
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        const send = all.find((b) => b.dataset.choice === "send");
        if (send) send.click();
      }
    });
  }
  card.append(buttons, status);
  const onStatus = () => {
    const value = model.get("status");
    if (value !== "waiting") disable({ stopped: "Stopped.", nobody: "Closed." }[value] || "");
  };
  model.on("change:status", onStatus);
  onStatus();
  el.appendChild(card);
  if (model.get("status") === "waiting") waitForPerson(card, heading || String(text || "").split("\n")[0] || "The agent asks");
  acknowledge(model);
}
// A card that waits for the person: a region named by what it asks, said once through the
// page's polite live region, and given the keyboard focus unless the person types elsewhere.
function waitForPerson(card, label) {
  card.setAttribute("role", "region");
  card.setAttribute("aria-label", label);
  card.tabIndex = -1;
  let region = document.getElementById("ak-announcer");
  if (!region) {
    region = document.createElement("div");
    region.id = "ak-announcer";
    region.className = "ak-visually-hidden";
    region.setAttribute("role", "status");
    region.setAttribute("aria-live", "polite");
    region.style.cssText = "position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;";
    document.body.appendChild(region);
  }
  const said = region;
  said.textContent = "";
  setTimeout(() => { said.textContent = label + ": waiting for your answer."; }, 100);
  let tries = 0;
  const focus = () => {
    if (!card.isConnected) {
      if (++tries < 50) setTimeout(focus, 100);
      return;
    }
    const active = /** @type {HTMLElement | null} */ (document.activeElement);
    const typing = active && active !== document.body && !active.closest(".ak-chat-input") &&
      (active instanceof HTMLInputElement || active instanceof HTMLTextAreaElement ||
       active instanceof HTMLSelectElement || active.isContentEditable);
    if (!typing) card.focus({ preventScroll: true });
  };
  setTimeout(focus, 0);
}
// The keyboard stays on the card when the control it was on is disabled (an answered card).
function keepFocusOn(card) {
  if (card.contains(document.activeElement) && document.activeElement !== card) {
    card.tabIndex = -1;
    card.focus({ preventScroll: true });
  }
}
export default { render };
