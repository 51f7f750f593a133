// Shared pieces of memkit's anywidget panels (concatenated in front of each panel's module).
// Every piece of user text goes into the page through textContent or an attribute, never innerHTML.

const STATUS_COLOURS = {
  success: "#2e7d32", failed: "#c62828", retrying: "#ef6c00", running: "#1565c0",
  pending: "#78909c", skipped: "#9e9e9e", unknown: "#6d4c41",
};

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "style") Object.assign(node.style, value);
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function statusBadge(status) {
  const s = status || "unknown";
  return h("span", { class: `mk-badge mk-status-${s}`, style: { background: STATUS_COLOURS[s] || STATUS_COLOURS.unknown }, text: s });
}

// A JSON value as a collapsible tree; strings longer than `fold` characters are folded.
function jsonTree(value, fold = 160, depth = 0) {
  if (value === null || typeof value !== "object") {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    const cls = `mk-json-${value === null ? "null" : typeof value}`;
    if (typeof value === "string" && text.length > fold) {
      const span = h("span", { class: cls, title: "click to show all" });
      let open = false;
      const draw = () => { span.textContent = open ? text : text.slice(0, fold) + ` … (${text.length} chars)`; };
      span.addEventListener("click", () => { open = !open; draw(); });
      span.style.cursor = "pointer";
      draw();
      return span;
    }
    return h("span", { class: cls, text: typeof value === "string" ? JSON.stringify(value) : text });
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  const label = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
  if (!entries.length) return h("span", { class: "mk-json-empty", text: Array.isArray(value) ? "[]" : "{}" });
  const details = h("details", { class: "mk-json", open: depth < 2 ? "" : null });
  details.append(h("summary", { text: label }));
  const list = h("div", { class: "mk-json-body" });
  for (const [key, child] of entries) {
    list.append(h("div", { class: "mk-json-row" }, h("span", { class: "mk-json-key", text: `${key}: ` }), jsonTree(child, fold, depth + 1)));
  }
  details.append(list);
  return details;
}

function copyButton(getText) {
  return h("button", {
    class: "mk-copy", text: "copy", title: "copy as JSON",
    onclick: (event) => {
      event.stopPropagation();
      const text = getText();
      if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
    },
  });
}

// A data grid over rows (objects). columns: [{key, label, width, sortKey, render(row) -> Node|string, title(row)}].
// Sorting and filtering state live in the model (Python does the work); the grid only draws and reports.
function dataGrid({ columns, rows, sort, onSort, onRowClick, rowClass, selectedKey, keyOf, hidden }) {
  const visible = columns.filter((c) => !(hidden || []).includes(c.key));
  const table = h("table", { class: "mk-grid" });
  const head = h("tr");
  for (const col of visible) {
    const active = sort && sort.column === (col.sortKey || col.key);
    const arrow = active ? (sort.descending ? " ▼" : " ▲") : "";
    head.append(h("th", {
      class: `mk-col-${col.key}${active ? " mk-sorted" : ""}`, style: col.width ? { width: col.width } : null,
      title: col.sortable === false ? null : "click to sort", text: col.label + arrow,
      onclick: col.sortable === false || !onSort ? null : () => onSort(col.sortKey || col.key),
    }));
  }
  table.append(h("thead", {}, head));
  const body = h("tbody");
  for (const row of rows) {
    const key = keyOf ? keyOf(row) : null;
    const tr = h("tr", {
      class: [rowClass ? rowClass(row) : "", key !== null && key === selectedKey ? "mk-selected" : ""].join(" ").trim() || null,
      "data-key": key,
      onclick: onRowClick ? () => onRowClick(row) : null,
    });
    for (const col of visible) {
      const content = col.render ? col.render(row) : row[col.key];
      const full = col.title ? col.title(row) : (content instanceof Node ? null : content);
      tr.append(h("td", { class: `mk-col-${col.key}`, title: full === null || full === undefined ? null : String(full) },
        content === null || content === undefined ? "" : content));
    }
    body.append(tr);
  }
  table.append(body);
  return h("div", { class: "mk-grid-wrap" }, table);
}

function columnPicker(columns, hidden, onChange) {
  const box = h("details", { class: "mk-columns" }, h("summary", { text: "columns" }));
  for (const col of columns) {
    const input = h("input", { type: "checkbox", checked: (hidden || []).includes(col.key) ? null : "" });
    input.addEventListener("change", () => {
      const now = new Set(hidden || []);
      if (input.checked) now.delete(col.key); else now.add(col.key);
      onChange([...now]);
    });
    box.append(h("label", {}, input, " " + col.label));
  }
  return box;
}

// Asks the kernel for its whole state once drawn (Panel.answer_ready says why).
function askForState(model) { model.send({ action: "ready" }); }

function busyLine(model) {
  const line = h("div", { class: "mk-message" });
  let timer = null;
  const draw = () => {
    const kind = model.get("message_kind") || "info";
    line.className = `mk-message mk-${kind}`;
    line.textContent = model.get("message") || "";
    clearTimeout(timer);
    if (model.get("busy")) {
      // Only work that takes a noticeable time shows the indicator.
      timer = setTimeout(() => { if (model.get("busy")) { line.className = "mk-message mk-busy"; line.textContent = "working…"; } }, 200);
    }
  };
  model.on("change:message", draw);
  model.on("change:message_kind", draw);
  model.on("change:busy", draw);
  draw();
  return line;
}

function send(model, name, value) {
  model.set(name, value);
  model.save_changes();
}
