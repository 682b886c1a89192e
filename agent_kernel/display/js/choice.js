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
export default { render };
