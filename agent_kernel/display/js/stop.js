// @ts-check
// The Stop button shown while a turn runs (stop.py). A click tells the turn through the
// widget's comm; when no "stopped" answer comes within INTERRUPT_AFTER_MS (stop.py prepends
// it) and the front end exposes the kernel, the click also interrupts the kernel.

/** @param {RenderProps} props */
function render({ model, el }) {
  const button = document.createElement("button");
  button.className = "agent-kernel-stop";
  button.textContent = "\u25a0 Stop";
  button.title = "Stop this agent turn";
  button.addEventListener("click", () => {
    if (button.disabled) return;
    button.disabled = true;
    button.textContent = "Stopping\u2026";
    model.set("clicked", true);
    model.save_changes();
    let answered = false;
    model.on("msg:custom", (message) => {
      if (message && message.type === "stopped") answered = true;
    });
    model.send({ type: "stop" });
    setTimeout(() => {
      const kernel = model.widget_manager && model.widget_manager.kernel;
      if (!answered && kernel && typeof kernel.interrupt === "function") {
        kernel.interrupt().catch(() => {});
      }
    }, INTERRUPT_AFTER_MS);
  });
  el.appendChild(button);
  acknowledge(model);
}
export default { render };
