// A component the agent wrote, in a frame that cannot reach this page: sandbox
// "allow-scripts" only (an opaque origin: no cookies, storage, parent DOM or top
// navigation), and a document that starts with a Content-Security-Policy allowing no
// network. The component talks to the kernel only through the bridge below; this script
// forwards a message only when it comes from that frame and fits in MAX_MESSAGE
// characters, and the kernel checks it again.
const MAX_MESSAGE = 65536;
const CSP =
  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; " +
  "font-src data:; form-action 'none'; base-uri 'none'";

function bridgeScript(state) {
  const initial = JSON.stringify(state).replace(/</g, "\\u003c");
  return `<script>(function () {
  var pending = {}, next = 1, listeners = [];
  var ak = { state: ${initial} };
  function post(msg) { msg.ak = 1; parent.postMessage(msg, "*"); }
  ak.setState = function (patch) {
    for (var key in patch) ak.state[key] = patch[key];
    post({ kind: "state", state: ak.state });
    listeners.forEach(function (f) { f(ak.state); });
  };
  ak.onState = function (f) { listeners.push(f); };
  ak.send = function (name, data) { post({ kind: "message", name: name, data: data === undefined ? null : data }); };
  ak.call = function (tool, input) {
    var id = next++;
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
      post({ kind: "call", id: id, tool: tool, input: input || {} });
    });
  };
  ak.onError = function (message) {};
  window.addEventListener("message", function (event) {
    if (event.source !== parent) return;
    var m = event.data;
    if (!m || m.ak !== 1) return;
    if (m.kind === "result" && pending[m.id]) {
      var p = pending[m.id];
      delete pending[m.id];
      if (!m.ok) { p.reject(new Error(m.content)); return; }
      var value = m.content;
      try { value = JSON.parse(value); } catch (e) {}
      p.resolve(value);
    } else if (m.kind === "error") {
      ak.onError(m.message);
    }
  });
  window.ak = ak;
})();<\/script>`;
}

function frameDocument(model) {
  return (
    `<!doctype html><html><head><meta http-equiv="Content-Security-Policy" content="${CSP}">` +
    `<meta charset="utf-8">${bridgeScript(model.get("initial_state"))}</head>` +
    `<body>${model.get("body")}</body></html>`
  );
}

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

  let loads = 0;
  frame.addEventListener("load", () => {
    loads += 1;
    if (loads > 1) {
      // Its document went away: the component navigated the frame (location, a meta refresh).
      frame.remove();
      notice.textContent = "The component tried to navigate: it was removed.";
      model.send({ type: "navigated" });
    }
  });
  function onMessage(event) {
    if (!frame.isConnected || event.source !== frame.contentWindow) return;
    const msg = event.data;
    if (!msg || typeof msg !== "object" || msg.ak !== 1 || typeof msg.kind !== "string") return;
    let text;
    try {
      text = JSON.stringify(msg);
    } catch (e) {
      return;
    }
    if (text.length > MAX_MESSAGE) {
      notice.textContent = "A message from the component was too large and was dropped.";
      return;
    }
    const copy = JSON.parse(text);
    delete copy.ak;
    model.send({ type: "component", msg: copy });
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
  frame.srcdoc = frameDocument(model);
  el.appendChild(card);
  acknowledge(model);
  return () => window.removeEventListener("message", onMessage);
}
export default { render };
