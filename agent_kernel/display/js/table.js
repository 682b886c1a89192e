// @ts-check
// A paged, sortable table. The kernel holds the rows and sends one page at a time, so a
// DataFrame of any size costs the page only what one page costs. Clicks ask the kernel
// for a view ({type: "view", page, sort_key, sort_desc}); it answers with new state.
/** @param {RenderProps} props */
function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "ak-card ak-table-card";
  const caption = document.createElement("h4");
  const wrap = document.createElement("div");
  wrap.className = "ak-table-wrap";
  const table = document.createElement("table");
  table.className = "ak-table";
  const thead = document.createElement("thead");
  const tbody = document.createElement("tbody");
  table.append(thead, tbody);
  wrap.appendChild(table);
  const pager = document.createElement("div");
  pager.className = "ak-pager";
  const first = button("«", "First page");
  const prev = button("‹", "Previous page");
  const where = document.createElement("span");
  where.setAttribute("role", "status"); // the rows shown, said after a page or a sort
  const next = button("›", "Next page");
  const last = button("»", "Last page");
  pager.append(first, prev, where, next, last);
  root.append(caption, wrap, pager);

  function button(text, title) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "ak-button";
    b.textContent = text;
    b.title = title;
    return b;
  }
  function pages() {
    return Math.max(1, Math.ceil(model.get("row_count") / model.get("page_size")));
  }
  // The view last asked for, until the kernel's state shows it: clicks made before the
  // answer arrives build on what was asked, not on what is drawn.
  let asked = null;
  function shown() {
    return { page: model.get("page"), sort_key: model.get("sort_key"), sort_desc: model.get("sort_desc") };
  }
  function wanted() {
    return asked || shown();
  }
  function ask(change) {
    asked = { ...wanted(), ...change };
    model.send({ type: "view", ...asked });
  }
  function go(page) {
    const target = Math.min(Math.max(page, 0), pages() - 1);
    if (target !== wanted().page) ask({ page: target });
  }
  first.addEventListener("click", () => go(0));
  prev.addEventListener("click", () => go(wanted().page - 1));
  next.addEventListener("click", () => go(wanted().page + 1));
  last.addEventListener("click", () => go(pages() - 1));

  function draw() {
    const now = shown();
    if (asked && asked.page === now.page && asked.sort_key === now.sort_key && asked.sort_desc === now.sort_desc) {
      asked = null;
    }
    caption.textContent = model.get("title");
    caption.style.display = model.get("title") ? "" : "none";
    const columns = model.get("columns");
    const numeric = new Set(model.get("numeric"));
    const sortKey = model.get("sort_key");
    const desc = model.get("sort_desc");
    // A redraw keeps the keyboard on the header it was on.
    const active = document.activeElement;
    const focused = active instanceof HTMLElement && thead.contains(active) ? active.dataset.key : undefined;
    thead.replaceChildren();
    const head = document.createElement("tr");
    for (const column of columns) {
      const th = document.createElement("th");
      th.scope = "col";
      th.dataset.key = column.key;
      if (numeric.has(column.key)) th.className = "ak-num";
      const sorted = column.key === sortKey;
      th.setAttribute("aria-sort", sorted ? (desc ? "descending" : "ascending") : "none");
      // A button: Tab reaches it, Enter and Space sort, a screen reader names what it does.
      const sort = document.createElement("button");
      sort.type = "button";
      sort.className = "ak-sort";
      sort.dataset.key = column.key;
      sort.title = "Sort by " + column.label;
      sort.style.cssText =
        "font: inherit; color: inherit; background: none; border: 0; padding: 0; margin: 0;" +
        " cursor: pointer; text-align: inherit; width: 100%; white-space: nowrap;";
      sort.textContent = column.label;
      if (sorted) {
        const arrow = document.createElement("span");
        arrow.setAttribute("aria-hidden", "true");
        arrow.textContent = desc ? " ▼" : " ▲";
        sort.appendChild(arrow);
      }
      sort.addEventListener("click", () => {
        // Ascending, then descending, then the original order.
        const view = wanted();
        if (view.sort_key !== column.key) ask({ sort_key: column.key, sort_desc: false, page: 0 });
        else if (!view.sort_desc) ask({ sort_desc: true, page: 0 });
        else ask({ sort_key: "", sort_desc: false, page: 0 });
      });
      th.appendChild(sort);
      head.appendChild(th);
    }
    thead.appendChild(head);
    if (focused !== undefined) {
      const again = /** @type {HTMLElement | null} */ (thead.querySelector(`button[data-key="${CSS.escape(focused)}"]`));
      if (again) again.focus({ preventScroll: true });
    }
    tbody.replaceChildren();
    for (const row of model.get("rows")) {
      const tr = document.createElement("tr");
      row.forEach((value, i) => {
        const td = document.createElement("td");
        td.textContent = value;
        td.title = value;
        if (numeric.has(columns[i].key)) td.className = "ak-num";
        tr.appendChild(td);
      });
      tbody.appendChild(tr);
    }
    const count = model.get("row_count");
    const size = model.get("page_size");
    const page = model.get("page");
    const start = count ? page * size + 1 : 0;
    const end = Math.min(count, (page + 1) * size);
    where.textContent = `Rows ${start.toLocaleString()}–${end.toLocaleString()} of ${count.toLocaleString()}`;
    pager.style.display = count > size ? "" : "none";
    first.disabled = prev.disabled = page <= 0;
    next.disabled = last.disabled = page >= pages() - 1;
  }
  model.on("change:rows", draw);
  model.on("change:columns", draw);
  model.on("change:sort_key", draw);
  model.on("change:sort_desc", draw);
  draw();
  el.appendChild(root);
  acknowledge(model);
}
export default { render };
