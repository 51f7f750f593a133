// memkit's graph view: one file for the live widget (anywidget) and the standalone page.
// Every piece of text from the store goes into the page through textContent or as a
// vis-network string title (shown with innerText): nothing is parsed as HTML.
// `model` is anywidget's model, or memkitStaticModel(data) in a saved page (no kernel).

function memkitStaticModel(data) {
  return {
    isStatic: true,
    get(name) { return name === "data" ? data : null; },
    set() {}, save_changes() {}, on() {}, off() {}, send() {},
  };
}

function memkitGraph(vis, el, model) {
  const make = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const root = make("div", "memkit-graph");
  const bar = make("div", "memkit-graph-bar");
  const search = make("input", "memkit-graph-search");
  search.type = "search";
  search.placeholder = "find a node by its caption (Enter)";
  const fitButton = make("button", "memkit-graph-fit", "Fit");
  const resetButton = make("button", "memkit-graph-reset", "Reset");
  const message = make("span", "memkit-graph-message");
  bar.append(search, fitButton, resetButton, message);
  const titleLine = make("div", "memkit-graph-title");
  const note = make("div", "memkit-graph-note");
  const legendBox = make("div", "memkit-graph-legend");
  const body = make("div", "memkit-graph-body");
  const canvas = make("div", "memkit-graph-canvas");
  const panel = make("div", "memkit-graph-props");
  panel.append(make("div", "memkit-graph-props-empty", "Click a node to see its properties; double-click to expand it."));
  body.append(canvas, panel);
  root.append(titleLine, bar, note, legendBox, body);
  el.append(root);

  let network = null;
  let nodes = null;
  let edges = null;
  let data = null;
  let needsFit = false;
  const props = new Map();  // node id -> properties, kept out of vis-network's DataSet (it copies every field)
  const LARGE = 2500;  // above this many nodes: small captions only on hubs, no arrows, edges hidden on zoom
  const hiddenTypes = new Set();
  const legendKey = (n) => (n.failed ? "Step:failed" : n.deleted ? "Memory:deleted" : n.type);
  const KEY_LABELS = { "Step:failed": "failed step", "Memory:deleted": "deleted memory" };

  function say(text) { message.textContent = text; }

  function options(d) {
    const large = d.nodes.length > LARGE;
    return {
      layout: { improvedLayout: false },
      physics: {
        enabled: !!d.physics, solver: "barnesHut",
        barnesHut: { gravitationalConstant: -6000, springLength: 130, springConstant: 0.04, damping: 0.5,
                     avoidOverlap: 0.3 },
        stabilization: { enabled: true, iterations: d.iterations || 100, updateInterval: 25, fit: true },
      },
      interaction: { hover: !large, tooltipDelay: 150, hideEdgesOnDrag: true, hideEdgesOnZoom: large },
      edges: { smooth: false, arrows: { to: { enabled: !large, scaleFactor: 0.4 } }, color: { color: "#b0b7c3" } },
      nodes: { font: { size: 12, face: "sans-serif" } },
    };
  }

  function settled() {
    if (message.textContent.startsWith("drawing ")) say("");
    const mark = () => {
      root.dataset.settled = "1";
      window.__memkitGraphSettled = performance.now();
    };
    if (canvas.clientWidth === 0) {  // drawn in a hidden tab: fit when it is shown
      needsFit = true;
      mark();
      return;
    }
    network.once("afterDrawing", mark);  // settled means drawn where it will stay
    network.fit({ animation: false });
    network.redraw();
  }

  function renderLegend() {
    legendBox.replaceChildren();
    const counts = {};
    nodes.forEach((n) => { const k = legendKey(n); counts[k] = (counts[k] || 0) + 1; });
    for (const item of data.legend.concat(extraLegend())) {
      const chip = make("button", "memkit-graph-chip");
      chip.dataset.type = item.type;
      const dot = make("span", "memkit-graph-dot");
      dot.style.background = item.color;
      chip.append(dot, make("span", "memkit-graph-chip-label", `${item.label} (${counts[item.type] || 0})`));
      if (hiddenTypes.has(item.type)) chip.classList.add("memkit-graph-off");
      chip.title = hiddenTypes.has(item.type) ? "show this type" : "hide this type";
      chip.addEventListener("click", () => toggle(item.type));
      legendBox.append(chip);
    }
    for (const item of data.edge_legend || []) {  // edge kinds: a line drawn as the canvas draws it
      const key = make("span", "memkit-graph-edge-key");
      key.dataset.type = item.type;
      const line = make("span", "memkit-graph-edge-line");
      line.style.borderTop = `${Math.max(item.width, 2)}px ${item.dashes ? "dashed" : "solid"} ${item.color}`;
      key.append(line, make("span", "", item.label));
      legendBox.append(key);
    }
  }

  function extraLegend() {  // types that arrived by expanding
    const known = new Set(data.legend.map((i) => i.type));
    const out = [];
    nodes.forEach((n) => {
      const k = legendKey(n);
      if (!known.has(k)) { known.add(k); out.push({ type: k, label: KEY_LABELS[k] || k, color: n.color.background }); }
    });
    return out;
  }

  function toggle(type) {
    if (hiddenTypes.has(type)) hiddenTypes.delete(type); else hiddenTypes.add(type);
    nodes.update(nodes.get().map((n) => ({ id: n.id, hidden: hiddenTypes.has(legendKey(n)) })));
    root.dataset.hidden = Array.from(hiddenTypes).sort().join(",");
    renderLegend();
  }

  function showProps(id) {
    panel.replaceChildren();
    const n = id === null ? null : nodes.get(id);
    if (!n) {
      panel.append(make("div", "memkit-graph-props-empty", "Click a node to see its properties; double-click to expand it."));
      return;
    }
    panel.append(make("div", "memkit-graph-props-title", n.caption));
    const table = make("table");
    for (const [key, value] of props.get(n.id) || []) {
      const row = make("tr");
      row.append(make("th", "", key));
      const cell = make("td");
      cell.append(make("pre", "", value));
      row.append(cell);
      table.append(row);
    }
    panel.append(table);
    if (!model.isStatic) panel.append(make("div", "memkit-graph-props-hint", "double-click the node to expand its neighbours"));
  }

  function select(id) {
    root.dataset.selected = id || "";
    showProps(id);
    model.set("selected_id", id);
    model.save_changes();
  }

  function find() {
    const q = search.value.trim().toLowerCase();
    if (!q) return;
    const visible = nodes.get({ filter: (n) => !n.hidden });
    const text = (n) => n.caption.toLowerCase();
    const hit = visible.find((n) => text(n) === q) || visible.find((n) => text(n).includes(q));
    if (!hit) { say(`no node matches "${search.value.trim()}"`); return; }
    network.selectNodes([hit.id]);
    network.focus(hit.id, { scale: 1.5, animation: false });
    root.dataset.focused = hit.id;
    select(hit.id);
    say(`found ${hit.type} "${hit.caption}"`);
  }

  function expanded(msg) {
    const parent = network.getPositions([msg.id])[msg.id] || { x: 0, y: 0 };
    const fresh = msg.nodes.filter((n) => nodes.get(n.id) === null);
    fresh.forEach((n, i) => {
      const angle = (2 * Math.PI * i) / Math.max(fresh.length, 1);
      n.x = parent.x + 160 * Math.cos(angle);
      n.y = parent.y + 160 * Math.sin(angle);
      n.hidden = hiddenTypes.has(legendKey(n));
    });
    nodes.add(fresh.map((n) => prepare(n, false)));
    edges.update(msg.edges);
    root.dataset.expanded = String(Number(root.dataset.expanded || 0) + fresh.length);
    renderLegend();
    say(msg.message);
  }

  function prepare(n, large) {
    const { props: rows, ...node } = n;
    props.set(n.id, rows);
    node.caption = n.label;
    if (large && (n.type === "Memory" || n.type === "Step")) node.label = undefined;
    return node;
  }

  function draw(d) {
    data = d;
    if (network) network.destroy();
    hiddenTypes.clear();
    root.dataset.settled = "";
    root.dataset.expanded = "0";
    root.dataset.hidden = "";
    titleLine.textContent = d.title || "";
    note.textContent = d.message || "";
    say("");
    props.clear();
    const large = d.nodes.length > LARGE;
    const all = d.nodes.map((n) => prepare(n, large));
    // A large graph goes in by chunks, one task each, so the page never freezes while it loads.
    nodes = new vis.DataSet(large ? [] : all);
    edges = new vis.DataSet(large ? [] : d.edges);
    network = new vis.Network(canvas, { nodes, edges }, options(d));
    if (large) {
      const chunk = 1500;
      network.body.emitter.emit("_blockRedraw");  // one drawing at the end, not one per chunk
      const jobs = [];
      for (let i = 0; i < all.length; i += chunk) jobs.push(() => nodes.add(all.slice(i, i + chunk)));
      for (let i = 0; i < d.edges.length; i += chunk * 2) jobs.push(() => edges.add(d.edges.slice(i, i + chunk * 2)));
      const run = () => {
        const job = jobs.shift();
        if (job) { job(); setTimeout(run, 0); return; }
        network.body.emitter.emit("_allowRedraw");
        network.once("afterDrawing", settled);
        network.redraw();
      };
      say(`drawing ${all.length.toLocaleString()} nodes…`);
      setTimeout(run, 0);
    } else if (d.physics) {
      network.once("stabilizationIterationsDone", () => { network.setOptions({ physics: { enabled: false } }); settled(); });
    } else {
      network.once("afterDrawing", settled);
    }
    network.on("click", (p) => select(p.nodes.length ? p.nodes[0] : null));
    network.on("doubleClick", (p) => {
      if (!p.nodes.length) return;
      if (model.isStatic) { say("expanding a node needs the live widget (memkit.widgets.GraphExplorer in Jupyter)"); return; }
      say("expanding…");
      model.send({ event: "expand", id: p.nodes[0] });
    });
    renderLegend();
    showProps(null);
    root.__memkit = { network, nodes, edges };
  }

  search.addEventListener("keydown", (e) => { if (e.key === "Enter") find(); });
  fitButton.addEventListener("click", () => network && network.fit({ animation: false }));
  resetButton.addEventListener("click", () => draw(model.get("data")));
  const onMsg = (msg) => { if (msg && msg.event === "expanded") expanded(msg); else if (msg && msg.event === "error") say(msg.message); };
  const onData = () => draw(model.get("data"));
  model.on("msg:custom", onMsg);
  model.on("change:data", onData);

  // A graph drawn inside a hidden tab has no size: fit it when it first becomes visible.
  let wasHidden = canvas.clientWidth === 0;
  const observer = new ResizeObserver(() => {
    const hidden = canvas.clientWidth === 0;
    if (!hidden && network && (wasHidden || needsFit)) {
      network.redraw();
      network.fit({ animation: false });
      needsFit = false;
    }
    wasHidden = hidden;
  });
  observer.observe(canvas);

  const first = model.get("data");
  if (first && first.nodes) draw(first);
  return () => {
    observer.disconnect();
    model.off("msg:custom", onMsg);
    model.off("change:data", onData);
    if (network) network.destroy();
  };
}
