// @ts-check
// The "Insert as cells" button under a finished turn's footer (cells_button.py): a click
// sends {type: "insert"}; the kernel's {type: "done" | "failed", text} is shown beside it.

/** @param {RenderProps} props */
function render({ model, el }) {
  const button = document.createElement("button");
  button.className = "agent-kernel-insert-cells";
  button.textContent = "Insert as cells";
  button.title = "Put this turn's prompt, answer and code below its cell, to re-run without the model";
  const said = document.createElement("span");
  said.className = "agent-kernel-insert-cells-said";
  button.addEventListener("click", () => {
    if (button.disabled) return;
    button.disabled = true;
    said.textContent = "Inserting\u2026";
    model.send({ type: "insert" });
  });
  model.on("msg:custom", (message) => {
    if (!message || (message.type !== "done" && message.type !== "failed")) return;
    said.textContent = String(message.text || "").slice(0, 500);
    if (message.type === "failed") button.disabled = false;
  });
  el.appendChild(button);
  el.appendChild(said);
  acknowledge(model);
}
export default { render };
