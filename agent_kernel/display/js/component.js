// @ts-check
// A component the agent wrote, two frames deep: this script makes our frame (sandbox
// "allow-scripts" only: an opaque origin with no cookies, storage, parent DOM, popups,
// forms or top navigation) from the document the kernel built, whose own script makes
// the component's frame and relays its messages (see components.py). This script
// forwards a message only when it comes from our frame, is one our frame relayed and fits
// in MAX_MESSAGE characters; the kernel checks it again.
const MAX_MESSAGE = 65536;
const KINDS = ["state", "message", "call"];

function relayed(data) {
  // What our frame relays: {ak: 1, msg}, {ak: 1, navigated: true} or {ak: 1, dropped: true}.
  if (!data || typeof data !== "object" || data.ak !== 1) return null;
  if (data.navigated === true) return { navigated: true };
  if (data.dropped === true) return { dropped: true };
  let text;
  try {
    text = JSON.stringify(data.msg);
  } catch (e) {
    return null;
  }
  if (typeof text !== "string" || text.length > MAX_MESSAGE) return { dropped: true };
  const msg = JSON.parse(text);
  if (!msg || typeof msg !== "object" || !KINDS.includes(msg.kind)) return null;
  return { msg };
}

/** @param {RenderProps} props */
function render({ model, el }) {
  const card = document.createElement("div");
  card.className = "ak-card ak-component";
  const head = document.createElement("h4");
  head.textContent = model.get("heading");
  const origin = document.createElement("div");
  origin.className = "ak-component-origin";
  origin.textContent = model.get("origin");
  origin.style.cssText = "color: var(--jp-ui-font-color2, #57606a); font-size: 0.9em; margin-bottom: 4px";
  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");
  frame.setAttribute("referrerpolicy", "no-referrer");
  frame.className = "ak-component-frame";
  frame.style.cssText = `width: 100%; height: ${model.get("height")}px; border: 1px solid var(--jp-border-color2, #eaeef2); border-radius: 4px; background: #fff`;
  const notice = document.createElement("div");
  notice.className = "ak-status ak-component-notice";
  const buttons = document.createElement("div");
  buttons.className = "ak-buttons";
  const submit = document.createElement("button");
  submit.className = "ak-button ak-primary";
  submit.textContent = "Submit";
  const dismiss = document.createElement("button");
  dismiss.className = "ak-button";
  dismiss.textContent = "Dismiss";
  buttons.append(submit, dismiss);
  card.append(head, origin, frame, buttons, notice);

  let removed = false;
  function navigated() {
    // The component's frame (or ours) loaded a second document: it tried to navigate.
    if (removed) return;
    removed = true;
    frame.remove();
    notice.textContent = "The component tried to navigate: it was removed.";
    model.send({ type: "navigated" });
  }
  let loads = 0;
  frame.addEventListener("load", () => {
    loads += 1;
    if (loads > 1) navigated();
  });
  function onMessage(event) {
    if (!frame.isConnected || event.source !== frame.contentWindow) return;
    const got = relayed(event.data);
    if (!got) return;
    if (got.navigated) navigated();
    else if (got.dropped) notice.textContent = "A message from the component was too large and was dropped.";
    else model.send({ type: "component", msg: got.msg });
  }
  window.addEventListener("message", onMessage);
  model.on("msg:custom", (msg) => {
    if (!msg || typeof msg.kind !== "string") return;
    if (msg.kind === "error") notice.textContent = msg.message;
    if (frame.isConnected && frame.contentWindow) frame.contentWindow.postMessage({ ...msg, ak: 1 }, "*");
  });
  submit.addEventListener("click", () => {
    submit.disabled = dismiss.disabled = true;
    model.send({ type: "submit" });
  });
  dismiss.addEventListener("click", () => {
    submit.disabled = dismiss.disabled = true;
    model.send({ type: "dismiss" });
  });
  const onStatus = () => {
    const status = model.get("status");
    buttons.style.display = status === "waiting" ? "" : "none";
    if (!["waiting", "live"].includes(status)) {
      notice.textContent = { answered: "Sent.", stopped: "Stopped.", nobody: "Closed." }[status] || status;
    }
  };
  model.on("change:status", onStatus);
  onStatus();
  frame.srcdoc = model.get("document");
  el.appendChild(card);
  acknowledge(model);
  return () => window.removeEventListener("message", onMessage);
}
export default { render };
