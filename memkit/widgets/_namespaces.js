// NamespaceBrowser's table: a data grid of one page (or one search) of memories.
// Python sends display-ready rows of one page and filters the whole namespace by column; sorting this
// page, column choice and hover text happen here.

const LEG_COLOURS = { keyword: "#1565c0", semantic: "#8e24aa" };

function scoreBar(row) {
  if (row.score === null || row.score === undefined) return "";
  const box = h("span", { class: "mk-score" });
  const legs = row.legs || [];
  for (const leg of legs) {
    box.append(h("span", {
      class: `mk-score-bar mk-leg-${leg.name}`,
      style: { width: `${Math.max(Math.round(leg.share * 40), leg.found ? 3 : 0)}px`, background: LEG_COLOURS[leg.name] || "#607d8b" },
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

// The id cell: its first characters, the full id on hover and one click from the clipboard
// (the click copies rather than opening the row).
function idCell(row) {
  const copy = h("button", {
    class: "mk-copy-id", text: "copy", title: `copy the full id ${row.id}`,
    onclick: (event) => {
      event.stopPropagation();
      if (navigator.clipboard) navigator.clipboard.writeText(row.id).catch(() => {});
      copy.textContent = "copied";
      setTimeout(() => { copy.textContent = "copy"; }, 1200);
    },
  });
  return h("span", { class: "mk-id" }, h("span", { class: "mk-id-text", text: row.short_id }), copy);
}

// Column widths are in _panels.css (narrower when the detail is open): the memory column takes what
// is left and wraps at word boundaries; metadata is cut with an ellipsis, its full text on hover.
const NS_COLUMNS = [
  { key: "n", label: "#" },
  { key: "created", label: "created", sortKey: "created_ts" },
  { key: "score", label: "score", render: scoreBar, title: scoreTitle },
  { key: "text", label: "memory", title: (r) => r.full },
  { key: "metadata", label: "metadata", title: (r) => r.metadata_full },
  { key: "short_id", label: "id", title: (r) => r.id, render: idCell },
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

// A narrow cell leaves the metadata column out (_panels.css): this line, shown only then, says where it went.
function narrowNote(columns, hidden) {
  const meta = columns.find((c) => c.key === "metadata");
  if (!meta || hidden.includes("metadata")) return null;
  return h("span", { class: "mk-narrow-note", text: `${meta.label}: in the detail (click a row); the cell is too narrow for its column`,
    title: "widen the cell (or the window) to show the column" });
}

// The kernel builds the CSV of the whole view (every matching row, not this page) and sends it back.
function download(name, text) {
  const link = document.createElement("a");
  link.download = name;
  link.href = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

function render({ model, el }) {
  el.classList.add("memkit-panel", "memkit-namespaces");
  const caption = h("div", { class: "mk-caption" });
  const body = h("div");
  el.append(busyLine(model), caption, body);
  let sort = null;
  // Filters apply in the kernel over the whole namespace; the boxes hold what was typed until it is sent.
  const typed = { ...(model.get("column_filters") || {}) };
  let timer = null;
  let focus = null;  // [column key, caret] of the filter box being typed in, kept across redraws
  const submit = () => { clearTimeout(timer); timer = setTimeout(() => send(model, "column_filters", { ...typed }), 300); };
  const draw = () => {
    const kind = model.get("kind") || "memories";
    const columns = columnsFor(kind);
    const rows = [...(model.get("rows") || [])];
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
    const shown = columns.filter((c) => !hidden.includes(c.key));
    const csv = h("button", { class: "mk-csv", text: "CSV", title: "download every row of this view as CSV: all pages, or every hit of a search (not only this page), column filters applied",
      onclick: () => model.send({ action: "csv", columns: shown.map((c) => ({ key: c.key, label: c.label })) }) });
    caption.replaceChildren(...[h("span", { class: "mk-total", text: model.get("caption") || "" }),
      columnPicker(columns, model.get("hidden_columns"), (now) => send(model, "hidden_columns", now)), csv,
      scored ? scoreLegend() : null, narrowNote(columns, hidden)].filter(Boolean));
    const grid = dataGrid({
      columns, rows, hidden, sort,
      onSort: (column) => { sort = { column, descending: sort && sort.column === column ? !sort.descending : false }; draw(); },
      keyOf: (r) => r.id, selectedKey: model.get("value"),
      rowClass: (r) => (r.trace ? `mk-trace mk-run-${r.status}` : ""),
      onRowClick: (r) => send(model, "value", model.get("value") === r.id ? "" : r.id),
    });
    // one filter box per column, under its header (none for the row number, which follows the filter)
    const filterRow = h("tr", { class: "mk-filter-row" });
    for (const col of shown) {
      if (col.key === "n") { filterRow.append(h("th", { class: "mk-col-n" })); continue; }
      const input = h("input", { class: `mk-col-filter mk-col-filter-${col.key}`, placeholder: "filter", value: typed[col.key] || "",
        title: "rows whose cell contains this text (any case), over the whole namespace" });
      input.addEventListener("input", () => { typed[col.key] = input.value; focus = [col.key, input.selectionStart]; submit(); });
      // a box a redraw removed keeps the caret for its replacement; one the user left lets it go
      input.addEventListener("blur", () => setTimeout(() => { if (input.isConnected && focus && focus[0] === col.key) focus = null; }, 0));
      filterRow.append(h("th", { class: `mk-col-${col.key}` }, input));
    }
    grid.querySelector("thead").append(filterRow);
    const parts = [grid];
    if (!rows.length) parts.push(h("div", { class: "mk-empty", text: model.get("empty_text") || "nothing here" }));
    body.replaceChildren(...parts);
    if (focus) {
      const again = body.querySelector(`.mk-col-filter-${focus[0]}`);
      if (again) { again.focus(); again.setSelectionRange(focus[1], focus[1]); }
    }
  };
  model.on("change:column_filters", () => {
    // set from Python (cleared, or chosen in code): the boxes show it, unless one is being typed in
    if (!focus) { for (const k of Object.keys(typed)) delete typed[k]; Object.assign(typed, model.get("column_filters") || {}); }
    draw();
  });
  model.on("msg:custom", (msg) => { if (msg && msg.event === "csv") download(msg.name, msg.text); });
  for (const name of ["rows", "caption", "hidden_columns", "value", "empty_text", "kind"]) model.on(`change:${name}`, draw);
  draw();
  askForState(model);
}

export default { render };
