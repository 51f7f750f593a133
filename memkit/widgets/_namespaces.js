// NamespaceBrowser's table: a data grid of one page (or one search) of memories.
// Python sends display-ready rows; sorting, column choice and hover text happen here.

const LEG_COLOURS = { keyword: "#1565c0", semantic: "#8e24aa" };

function scoreBar(row) {
  if (row.score === null || row.score === undefined) return "";
  const box = h("span", { class: "mk-score" });
  const legs = row.legs || [];
  for (const leg of legs) {
    box.append(h("span", {
      class: `mk-score-bar mk-leg-${leg.name}`,
      style: { width: `${Math.max(Math.round(leg.share * 60), leg.found ? 3 : 0)}px`, background: LEG_COLOURS[leg.name] || "#607d8b" },
    }));
  }
  box.append(h("span", { class: "mk-score-num", text: ` ${row.score.toFixed(3)}` }));
  return box;
}

function scoreTitle(row) {
  if (row.score === null || row.score === undefined) return null;
  const parts = (row.legs || []).map((l) => l.found ? `${l.name}: rank ${l.rank}, score ${l.raw}` : `${l.name}: not found`);
  return [`score ${row.score.toFixed(3)}`, ...parts].join("\n");
}

const NS_COLUMNS = [
  { key: "n", label: "#" },
  { key: "created", label: "created", sortKey: "created_ts" },
  { key: "score", label: "score", render: scoreBar, title: scoreTitle },
  { key: "text", label: "memory", title: (r) => r.full },
  { key: "metadata", label: "metadata", title: (r) => r.metadata_full },
  { key: "short_id", label: "id", title: (r) => r.id },
];

const KIND_LABELS = { recalls: { text: "query", metadata: "mode · hits · step" } };

function columnsFor(kind) {
  const names = KIND_LABELS[kind] || {};
  return NS_COLUMNS.map((c) => (names[c.key] ? { ...c, label: names[c.key] } : c));
}

function scoreLegend() {
  const key = (name) => h("span", { class: "mk-leg-key" },
    h("span", { class: "mk-score-bar", style: { width: "14px", background: LEG_COLOURS[name] } }), ` ${name}`);
  return h("span", { class: "mk-score-legend", title: "each bar is one search leg's share of the fused score" },
    "score bars:", key("keyword"), key("semantic"), " (length: that leg's share of the score)");
}

function csvCell(value) {
  const text = value === null || value === undefined ? "" : String(value);
  return /[",\n\r]/.test(text) || /^[=+\-@]/.test(text) ? `"${(/^[=+\-@]/.test(text) ? "'" : "") + text.replace(/"/g, '""')}"` : text;
}

function exportCsv(columns, rows, name) {
  const keys = columns.map((c) => c.key === "text" ? "full" : c.key === "metadata" ? "metadata_full" : c.key === "short_id" ? "id" : c.key);
  const lines = [columns.map((c) => csvCell(c.label)).join(",")];
  for (const r of rows) lines.push(keys.map((k) => csvCell(r[k])).join(","));
  const link = document.createElement("a");
  link.download = name;
  link.href = URL.createObjectURL(new Blob([lines.join("\r\n") + "\r\n"], { type: "text/csv" }));
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

function render({ model, el }) {
  el.classList.add("memkit-panel", "memkit-namespaces");
  const caption = h("div", { class: "mk-caption" });
  const body = h("div");
  el.append(busyLine(model), caption, body);
  let sort = null;
  const filters = {};  // column key -> text a row's cell must contain (this page's rows)
  const draw = () => {
    const kind = model.get("kind") || "memories";
    const columns = columnsFor(kind);
    let rows = [...(model.get("rows") || [])];
    const total = rows.length;
    const cellText = (r, key) => String(key === "text" ? r.full : key === "metadata" ? r.metadata_full : key === "short_id" ? r.id : r[key] ?? "").toLowerCase();
    for (const [key, want] of Object.entries(filters)) {
      if (want) rows = rows.filter((r) => cellText(r, key).includes(want.toLowerCase()));
    }
    const scored = rows.some((r) => r.score !== null && r.score !== undefined);
    const hidden = [...(model.get("hidden_columns") || []), ...(scored ? [] : ["score"])];
    if (sort) {
      const key = sort.column;
      rows.sort((a, b) => {
        const x = a[key] ?? "", y = b[key] ?? "";
        const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return sort.descending ? -c : c;
      });
    }
    const csv = h("button", { class: "mk-csv", text: "CSV", title: "download these rows as CSV",
      onclick: () => exportCsv(columns.filter((c) => !hidden.includes(c.key)), rows, `memkit-${kind}.csv`) });
    const shown = rows.length === total ? "" : ` · ${rows.length} of ${total} match the column filters`;
    caption.replaceChildren(...[h("span", { class: "mk-total", text: (model.get("caption") || "") + shown }),
      columnPicker(columns, model.get("hidden_columns"), (now) => send(model, "hidden_columns", now)), csv,
      scored ? scoreLegend() : null].filter(Boolean));
    if (!total) { body.replaceChildren(h("div", { class: "mk-empty", text: model.get("empty_text") || "nothing here" })); return; }
    const grid = dataGrid({
      columns, rows, hidden, sort,
      onSort: (column) => { sort = { column, descending: sort && sort.column === column ? !sort.descending : false }; draw(); },
      keyOf: (r) => r.id, selectedKey: model.get("value"),
      rowClass: (r) => (r.trace ? `mk-trace mk-run-${r.status}` : ""),
      onRowClick: (r) => send(model, "value", model.get("value") === r.id ? "" : r.id),
    });
    // one filter box per column, under its header
    const filterRow = h("tr", { class: "mk-filter-row" });
    for (const col of columns.filter((c) => !hidden.includes(c.key))) {
      const input = h("input", { class: `mk-col-filter mk-col-filter-${col.key}`, placeholder: "filter", value: filters[col.key] || "" });
      input.addEventListener("input", () => {
        filters[col.key] = input.value;
        const at = input.selectionStart;
        draw();
        const again = body.querySelector(`.mk-col-filter-${col.key}`);
        if (again) { again.focus(); again.setSelectionRange(at, at); }
      });
      filterRow.append(h("th", {}, input));
    }
    grid.querySelector("thead").append(filterRow);
    body.replaceChildren(grid);
  };
  model.on("change:rows", () => { for (const k of Object.keys(filters)) delete filters[k]; draw(); });
  for (const name of ["caption", "hidden_columns", "value", "empty_text", "kind"]) model.on(`change:${name}`, draw);
  draw();
}

export default { render };
