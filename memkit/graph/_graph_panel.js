// memkit's graph view, the controls around the canvas: the toolbar, the legend, the size and colour
// rules and the properties panel (see _graph_layout.js for how the three files fit together).
// Every piece of text from the store goes into the page through textContent: nothing is parsed as HTML.

const MEMKIT_HINT = "Click a node to see its properties (a group opens); double-click to fetch its neighbours.";
const MEMKIT_PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
                        "#999999", "#882255", "#44AA99", "#117733"];
const MEMKIT_KEY_LABELS = { "Step:failed": "failed step", "Memory:deleted": "deleted memory", Group: "other memories" };

function memkitMake(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function memkitLegendKey(n) { return n.failed ? "Step:failed" : n.deleted ? "Memory:deleted" : n.type; }

// The widget's elements, appended to `el`: title, toolbar, note, legend, then the canvas beside the panel.
function memkitControls(el) {
  const make = memkitMake;
  const option = (select, value, text) => { const o = make("option", "", text); o.value = value; select.append(o); };
  const root = make("div", "memkit-graph");
  const bar = make("div", "memkit-graph-bar");
  const search = make("input", "memkit-graph-search");
  search.type = "search";
  search.placeholder = "find a node by its caption (Enter)";
  const fitButton = make("button", "memkit-graph-fit", "Fit");
  const fitSelection = make("button", "memkit-graph-fit-selection", "Fit selection");
  const resetButton = make("button", "memkit-graph-reset", "Reset");
  const pngButton = make("button", "memkit-graph-png", "PNG");
  pngButton.title = "save the current view as a PNG image";
  const sizeBy = make("select", "memkit-graph-size-by");
  for (const [v, t] of [["type", "size: by type"], ["count", "size: memories in group"], ["degree", "size: connections"],
                        ["recalls", "size: times recalled"]]) option(sizeBy, v, t);
  const colourBy = make("select", "memkit-graph-colour-by");
  for (const [v, t] of [["type", "colour: by type"], ["ns", "colour: namespace"], ["kind", "colour: entity kind"]]) {
    option(colourBy, v, t);
  }
  const message = make("span", "memkit-graph-message");
  bar.append(search, fitButton, fitSelection, resetButton, pngButton, sizeBy, colourBy, message);
  const titleLine = make("div", "memkit-graph-title");
  const note = make("div", "memkit-graph-note");
  const legendBox = make("div", "memkit-graph-legend");
  const body = make("div", "memkit-graph-body");
  const canvas = make("div", "memkit-graph-canvas");
  const panel = make("div", "memkit-graph-props");
  body.append(canvas, panel);
  root.append(titleLine, bar, note, legendBox, body);
  el.append(root);
  return { root, search, fitButton, fitSelection, resetButton, pngButton, sizeBy, colourBy, message, titleLine, note,
           legendBox, canvas, panel };
}

// -- legend, styling rules -----------------------------------------------------------------

function memkitRenderLegend(g) {
  const make = memkitMake, legendBox = g.legendBox;
  legendBox.replaceChildren();
  const total = {}, visible = {};
  let drawn = 0;
  g.nodes.forEach((n) => {
    const k = memkitLegendKey(n);
    total[k] = (total[k] || 0) + 1;
    if (!n.hidden) { visible[k] = (visible[k] || 0) + 1; drawn += 1; }
  });
  for (const item of g.data.legend.concat(memkitExtraLegend(g))) {
    const chip = make("button", "memkit-graph-chip");
    chip.dataset.type = item.type;
    const dot = make("span", "memkit-graph-dot");
    dot.style.background = item.color;
    const shown = visible[item.type] || 0, all = total[item.type] || 0;
    const text = shown === all ? `${item.label} (${all})` : `${item.label} (${shown} of ${all})`;
    chip.append(dot, make("span", "memkit-graph-chip-label", text));
    if (g.hiddenTypes.has(item.type)) chip.classList.add("memkit-graph-off");
    chip.title = g.hiddenTypes.has(item.type) ? "show this type" : "hide this type";
    chip.addEventListener("click", () => memkitToggle(g, item.type));
    legendBox.append(chip);
  }
  for (const item of g.data.edge_legend || []) {  // edge kinds: a line drawn as the canvas draws it
    const key = make("span", "memkit-graph-edge-key");
    key.dataset.type = item.type;
    const line = make("span", "memkit-graph-edge-line");
    line.style.borderTop = `${Math.max(item.width, 2)}px ${item.dashes ? "dashed" : "solid"} ${item.color}`;
    key.append(line, make("span", "", item.label));
    legendBox.append(key);
  }
  legendBox.append(make("span", "memkit-graph-drawn", `${drawn.toLocaleString()} drawn`));
  if (g.colourBy.value !== "type") {
    const key = make("span", "memkit-graph-colour-key");
    for (const [value, colour] of g.categories.entries()) {
      const dot = make("span", "memkit-graph-dot");
      dot.style.background = colour;
      key.append(dot, make("span", "", value));
    }
    legendBox.append(key);
  }
}

function memkitExtraLegend(g) {  // types that arrived by expanding
  const known = new Set(g.data.legend.map((i) => i.type));
  const out = [];
  g.nodes.forEach((n) => {
    const k = memkitLegendKey(n);
    if (!known.has(k)) {
      known.add(k);
      out.push({ type: k, label: MEMKIT_KEY_LABELS[k] || k, color: n.base.color.background });
    }
  });
  return out;
}

function memkitToggle(g, type) {
  const hiddenTypes = g.hiddenTypes;
  if (hiddenTypes.has(type)) hiddenTypes.delete(type); else hiddenTypes.add(type);
  g.nodes.update(g.nodes.get().map((n) => ({ id: n.id, hidden: hiddenTypes.has(memkitLegendKey(n)) })));
  g.root.dataset.hidden = Array.from(hiddenTypes).sort().join(",");
  memkitRenderLegend(g);
}

function memkitStyled(g, n) {  // the size and colour the current rules give a node
  const rule = g.sizeBy.value;
  const value = rule === "type" ? null : Number(n[rule] || 0);
  const size = value === null ? n.base.size : Math.round((5 + 2.5 * Math.log2(1 + value)) * 10) / 10;
  if (g.colourBy.value === "type") return { size, color: n.base.color };
  const key = String(n[g.colourBy.value] || "");
  const categories = g.categories;
  if (!categories.has(key)) categories.set(key, MEMKIT_PALETTE[categories.size % MEMKIT_PALETTE.length]);
  const c = categories.get(key);
  return { size, color: { background: c, border: c, highlight: { background: c, border: "#000000" } } };
}

function memkitRestyle(g) {
  g.categories.clear();
  g.nodes.update(g.nodes.get().map((n) => ({ id: n.id, ...memkitStyled(g, n) })));
  g.root.dataset.sizeBy = g.sizeBy.value;
  g.root.dataset.colourBy = g.colourBy.value;
  memkitRenderLegend(g);
}

function memkitApplyStyle(g, style) {
  if (style && style.size_by) g.sizeBy.value = style.size_by;
  if (style && style.color_by) g.colourBy.value = style.color_by;
}

// -- properties panel ----------------------------------------------------------------------

// What a click shows. Its buttons call back into memkitGraph through g.expandGroup and g.openRuns.
function memkitShowProps(g, id) {
  const make = memkitMake, panel = g.panel;
  panel.replaceChildren();
  const n = id === null ? null : g.nodes.get(id);
  if (!n) {
    panel.append(make("div", "memkit-graph-props-empty", MEMKIT_HINT));
    return;
  }
  panel.append(make("div", "memkit-graph-props-title", n.caption));
  if (n.group) {
    const shown = g.opened.get(n.id) || 0;
    const what = n.type === "Workflow" ? "runs" : n.type === "Trace" ? "steps" : n.type === "Tool" ? "steps" : "memories";
    const line = make("div", "memkit-graph-group", shown
      ? `${Math.min(shown, n.count).toLocaleString()} of ${n.count.toLocaleString()} ${what} shown`
      : `${n.count.toLocaleString()} ${what}; click to open`);
    panel.append(line);
    if (shown < n.count) {
      const more = make("button", "memkit-graph-more", shown ? "show more" : "open");
      more.addEventListener("click", () => g.expandGroup(n.id));
      panel.append(more);
    }
  }
  if (n.used_by && n.used_by.length) {
    const box = make("div", "memkit-graph-used-by");
    box.append(make("div", "memkit-graph-section", `used by ${n.used_by.length} run${n.used_by.length === 1 ? "" : "s"}`));
    for (const [, label] of n.used_by.slice(0, 12)) box.append(make("div", "memkit-graph-run", label));
    const open = make("button", "memkit-graph-open-runs",
      n.used_by.length > 6 ? "open the 6 most recent runs" : "open these runs");
    open.addEventListener("click", () => g.openRuns(n.id, n.used_by.map((r) => r[0])));
    box.append(open);
    panel.append(box);
  } else if (n.type === "Memory") {
    panel.append(make("div", "memkit-graph-used-by memkit-graph-props-hint", "no recorded run recalled this memory"));
  }
  if (g.pinned.has(n.id)) {
    const unpin = make("button", "memkit-graph-unpin", "unpin");
    unpin.addEventListener("click", () => {
      g.pinned.delete(n.id);
      g.nodes.update({ id: n.id, fixed: false });
      memkitShowProps(g, n.id);
    });
    panel.append(unpin);
  }
  const table = make("table");
  for (const [key, value] of g.props.get(n.id) || []) {
    const row = make("tr");
    row.append(make("th", "", key));
    const cell = make("td");
    cell.append(make("pre", "", value));
    row.append(cell);
    table.append(row);
  }
  panel.append(table);
  if (!g.model.isStatic) panel.append(make("div", "memkit-graph-props-hint", "double-click the node to fetch its neighbours"));
}
