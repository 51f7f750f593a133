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

function render({ model, el }) {
  el.classList.add("memkit-panel", "memkit-namespaces");
  const caption = h("div", { class: "mk-caption" });
  const body = h("div");
  el.append(busyLine(model), caption, body);
  let sort = null;
  const draw = () => {
    let rows = [...(model.get("rows") || [])];
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
    caption.replaceChildren(h("span", { class: "mk-total", text: model.get("caption") || "" }),
      columnPicker(NS_COLUMNS, model.get("hidden_columns"), (now) => send(model, "hidden_columns", now)));
    if (!rows.length) { body.replaceChildren(h("div", { class: "mk-empty", text: model.get("empty_text") || "nothing here" })); return; }
    body.replaceChildren(dataGrid({
      columns: NS_COLUMNS, rows, hidden, sort,
      onSort: (column) => { sort = { column, descending: sort && sort.column === column ? !sort.descending : false }; draw(); },
      keyOf: (r) => r.id, selectedKey: model.get("value"),
      rowClass: (r) => (r.trace ? `mk-trace mk-run-${r.status}` : ""),
      onRowClick: (r) => send(model, "value", model.get("value") === r.id ? "" : r.id),
    }));
  };
  for (const name of ["rows", "caption", "hidden_columns", "value", "empty_text"]) model.on(`change:${name}`, draw);
  draw();
}

export default { render };
