// @ts-check
// The form block: fields, required marks, defaults; submit sends the raw values to the
// kernel, which types them and answers with {type: "errors"} when one does not fit.
/** @param {RenderProps} props */
function render({ model, el }) {
  const form = document.createElement("form");
  form.className = "ak-card ak-form";
  form.noValidate = true;
  const title = model.get("title");
  if (title) {
    const h = document.createElement("h4");
    h.textContent = title;
    form.appendChild(h);
  }
  const inputs = {};
  const errors = {};
  const uid = Math.random().toString(36).slice(2, 8);
  for (const field of model.get("fields")) {
    const row = document.createElement("div");
    row.className = "ak-row" + (field.type === "checkbox" ? " ak-check" : "");
    const label = document.createElement("label");
    label.textContent = (field.label || field.name) + (field.required ? " *" : "");
    let input;
    if (field.type === "textarea") {
      input = document.createElement("textarea");
      input.rows = 3;
    } else if (field.type === "select") {
      input = document.createElement("select");
      if (field.default === undefined || field.default === null) {
        const blank = document.createElement("option");
        blank.value = "";
        blank.textContent = "—";
        input.appendChild(blank);
      }
      for (const choice of field.options || []) {
        const option = document.createElement("option");
        option.value = choice;
        option.textContent = choice;
        input.appendChild(option);
      }
    } else {
      input = document.createElement("input");
      input.type = { number: "number", checkbox: "checkbox", date: "date" }[field.type] || "text";
      if (field.type === "number") input.step = "any";
    }
    input.name = field.name;
    input.id = `ak-${uid}-${field.name}`;
    input.dataset.field = field.name;
    label.htmlFor = input.id;
    if (field.required) input.required = true;
    if (field.default !== undefined && field.default !== null) {
      if (field.type === "checkbox") /** @type {HTMLInputElement} */ (input).checked = Boolean(field.default);
      else input.value = String(field.default);
    }
    const error = document.createElement("div");
    error.className = "ak-error";
    if (field.type === "checkbox") {
      row.append(input, label, error);
    } else {
      row.append(label, input, error);
    }
    input.addEventListener("input", () => { error.textContent = ""; });
    input.addEventListener("change", () => { error.textContent = ""; });
    inputs[field.name] = input;
    errors[field.name] = error;
    form.appendChild(row);
  }
  const buttons = document.createElement("div");
  buttons.className = "ak-buttons";
  const submit = document.createElement("button");
  submit.type = "submit";
  submit.className = "ak-button ak-primary";
  submit.textContent = model.get("submit_label") || "Submit";
  const dismiss = document.createElement("button");
  dismiss.type = "button";
  dismiss.className = "ak-button";
  dismiss.textContent = "Dismiss";
  buttons.append(submit, dismiss);
  const status = document.createElement("div");
  status.className = "ak-status";
  status.setAttribute("role", "status");
  form.append(buttons, status);

  function showErrors(found) {
    for (const [name, node] of Object.entries(errors)) node.textContent = found[name] || "";
  }
  function setEnabled(enabled) {
    if (!enabled) keepFocusOn(form);
    const controls = /** @type {NodeListOf<HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement | HTMLButtonElement>} */ (
      form.querySelectorAll("input, select, textarea, button")
    );
    for (const node of controls) node.disabled = !enabled;
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = {};
    const missing = {};
    for (const field of model.get("fields")) {
      const input = inputs[field.name];
      data[field.name] = field.type === "checkbox" ? input.checked : input.value;
      if (field.required && field.type !== "checkbox" && !String(input.value).trim()) {
        missing[field.name] = `${field.label || field.name} is required.`;
      }
    }
    showErrors(missing);
    if (Object.keys(missing).length) return;
    setEnabled(false);
    status.textContent = "Sending…";
    model.send({ type: "submit", data });
  });
  dismiss.addEventListener("click", () => {
    setEnabled(false);
    model.send({ type: "dismiss" });
  });
  model.on("msg:custom", (msg) => {
    if (msg && msg.type === "errors") {
      showErrors(msg.errors || {});
      status.textContent = "";
      setEnabled(true);
    }
  });
  const onStatus = () => {
    const value = model.get("status");
    if (value !== "waiting") {
      setEnabled(false);
      status.textContent = { answered: "Sent.", stopped: "Stopped.", nobody: "Closed." }[value] || value;
    }
  };
  model.on("change:status", onStatus);
  onStatus();
  el.appendChild(form);
  if (model.get("status") === "waiting") waitForPerson(form, title ? `Form: ${title}` : "A form to fill in");
  acknowledge(model);
}
export default { render };
