// Grid: a DataFrame sorted, filtered and paged here in the page (the kernel sent every row once).

const PAGE_SIZES = [10, 25, 50, 100];

function cellText(value, kind) {
  if (value === null || value === undefined) return "";
  if (kind === "number" && typeof value === "number") {
    return Number.isInteger(value) ? value.toLocaleString("en-US") : value.toLocaleString("en-US", { maximumSignificantDigits: 6 });
  }
  if (kind === "time") return String(value).replace("T", " ").replace(/\+00:00$/, "");
  return String(value);
}

// A condition typed for a number or time column: >x, >=x, <x, <=x, =x, !=x or a..b; else null (text match).
function comparison(text, kind) {
  const m = /^\s*(>=|<=|!=|>|<|=)?\s*(.+?)\s*(?:\.\.\s*(.+?)\s*)?$/.exec(text);
  if (!m || (kind !== "number" && kind !== "time")) return null;
  const parse = (s) => (kind === "number" ? Number(s.replace(/,/g, "")) : Date.parse(s));
  const a = parse(m[2]);
  if (Number.isNaN(a)) return null;
  const of = (v) => (v === null ? NaN : kind === "number" ? v : Date.parse(v));
  if (m[3] !== undefined) {
    const b = parse(m[3]);
    return Number.isNaN(b) ? null : (v) => of(v) >= a && of(v) <= b;
  }
  const op = m[1] || "=";
  return { ">": (v) => of(v) > a, ">=": (v) => of(v) >= a, "<": (v) => of(v) < a, "<=": (v) => of(v) <= a,
    "=": (v) => of(v) === a, "!=": (v) => of(v) !== a }[op];
}

function compare(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;  // missing values last, either direction
  if (b === null || b === undefined) return -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

function render({ model, el }) {
  el.classList.add("memkit-panel", "memkit-table");
  const state = { sort: null, search: "", column: "", filter: "", page: 0, size: model.get("page_size") || 25 };
  const bar = h("div", { class: "mk-filters" });
  const body = h("div", { class: "mk-table-body" });
  const pager = h("div", { class: "mk-caption mk-table-pager" });
  el.append(busyLine(model), bar, body, pager);

  const columns = () => model.get("columns") || [];
  const data = () => model.get("data") || [];

  // The row numbers that pass the search and the column filter, in the chosen order.
  function visibleRows() {
    const cols = columns(), cells = data();
    const n = cells.length ? cells[0].length : 0;
    let rows = Array.from({ length: n }, (_, i) => i);
    const words = state.search.trim().toLowerCase();
    if (words) {
      const texts = cols.map((c, j) => cells[j].map((v) => cellText(v, c.kind).toLowerCase()));
      rows = rows.filter((i) => texts.some((t) => t[i].includes(words)));
    }
    const j = cols.findIndex((c) => c.name === state.column);
    if (j >= 0 && state.filter.trim()) {
      const kind = cols[j].kind;
      const test = comparison(state.filter, kind);
      const needle = state.filter.trim().toLowerCase();
      rows = rows.filter((i) => (test ? test(cells[j][i]) : cellText(cells[j][i], kind).toLowerCase().includes(needle)));
    }
    if (state.sort) {
      const k = cols.findIndex((c) => c.name === state.sort.column);
      if (k >= 0) {
        const sign = state.sort.descending ? -1 : 1;
        rows.sort((a, b) => {
          const x = cells[k][a], y = cells[k][b];
          if (x === null || x === undefined || y === null || y === undefined) return compare(x, y);
          return sign * compare(x, y) || a - b;
        });
      }
    }
    return rows;
  }

  function drawBar() {
    const search = h("input", { class: "mk-table-search", type: "search", placeholder: "search every column…", value: state.search, style: { width: "200px" } });
    search.addEventListener("input", () => { state.search = search.value; state.page = 0; draw(); });
    const pick = h("select", { class: "mk-table-column", title: "column to filter" }, h("option", { value: "", text: "filter a column…" }));
    for (const c of columns()) pick.append(h("option", { value: c.name, text: c.name, selected: c.name === state.column ? "" : null }));
    const filter = h("input", { class: "mk-table-filter", type: "search", value: state.filter, style: { width: "180px" },
      placeholder: "text, or >x, <=x, a..b", title: "a number or time column takes >x, >=x, <x, <=x, =x, !=x or a..b; any other column matches text" });
    pick.addEventListener("change", () => { state.column = pick.value; state.page = 0; draw(); });
    filter.addEventListener("input", () => { state.filter = filter.value; state.page = 0; draw(); });
    bar.replaceChildren(search, pick, filter);
  }

  function draw() {
    const cols = columns(), cells = data();
    const rows = visibleRows();
    const pages = Math.max(1, Math.ceil(rows.length / state.size));
    state.page = Math.min(state.page, pages - 1);
    const first = state.page * state.size;
    const shown = rows.slice(first, first + state.size).map((i) => cols.map((_, j) => cells[j][i]));
    const gridColumns = cols.map((c, j) => ({
      key: j, label: c.name, sortKey: c.name,
      render: (r) => cellText(r[j], c.kind), title: (r) => cellText(r[j], c.kind),
    }));
    body.replaceChildren(dataGrid({
      columns: gridColumns, rows: shown, sort: state.sort,
      onSort: (column) => {
        state.sort = { column, descending: state.sort && state.sort.column === column ? !state.sort.descending : false };
        draw();
      },
    }));
    const total = model.get("total_rows") || 0, sent = cells.length ? cells[0].length : 0;
    const size = h("select", { class: "mk-table-size", title: "rows per page" });
    for (const s of PAGE_SIZES) size.append(h("option", { value: s, text: `${s} / page`, selected: s === state.size ? "" : null }));
    size.addEventListener("change", () => { state.size = Number(size.value); state.page = 0; draw(); });
    const go = (page) => () => { state.page = page; draw(); };
    pager.replaceChildren(
      h("button", { class: "mk-table-prev", text: "‹ prev", disabled: state.page === 0 ? "" : null, onclick: go(state.page - 1) }),
      h("span", { class: "mk-table-count", text: rows.length
        ? `rows ${(first + 1).toLocaleString()}–${Math.min(first + state.size, rows.length).toLocaleString()} of ${rows.length.toLocaleString()}`
          + (rows.length < sent ? ` (filtered from ${sent.toLocaleString()})` : "")
        : `no row matches (of ${sent.toLocaleString()})` }),
      h("button", { class: "mk-table-next", text: "next ›", disabled: state.page >= pages - 1 ? "" : null, onclick: go(state.page + 1) }),
      size,
      total > sent ? h("span", { class: "mk-warn", text: `first ${sent.toLocaleString()} of ${total.toLocaleString()} rows sent` }) : "");
  }

  const redraw = () => { drawBar(); draw(); };
  model.on("change:columns", redraw);
  model.on("change:data", draw);
  redraw();
  askForState(model);
}

export default { render };
