// memkit's graph view: one script for the live widget (anywidget) and the standalone page, made of
// _graph_layout.js (where nodes go, the captions, the spotlight), _graph_panel.js (the toolbar, the
// legend, the properties panel) and this file (the drawing's state, opening groups, the events).
// Every piece of text from the store goes into the page through textContent, as a vis-network
// string title (shown with innerText) or drawn on the canvas: nothing is parsed as HTML.
// `model` is anywidget's model, or memkitStaticModel(data) in a saved page (no kernel).

function memkitStaticModel(data) {
  return {
    isStatic: true,
    get(name) { return name === "data" ? data : name === "style" ? (data.style || {}) : null; },
    set() {}, save_changes() {}, on() {}, off() {}, send() {},
  };
}

function memkitGraph(vis, el, model) {
  // The state every part of the view reads and changes: the elements, vis-network's network and
  // DataSets, and what this drawing has opened, pinned, hidden and measured.
  const g = {
    ...memkitControls(el),
    model,
    network: null,
    nodes: null,
    edges: null,
    data: null,
    ranked: [],  // node ids, the ones whose captions matter most first
    drawnCaptions: [],
    spot: null,  // the ids at the centre of the spotlight, or null
    props: new Map(),  // node id -> properties, kept out of vis-network's DataSet (it copies every field)
    widths: new Map(),  // node id -> caption width in px at MEMKIT_CAPTION_PX
    measure: document.createElement("canvas").getContext("2d"),
    opened: new Map(),  // group id -> members shown so far
    pinned: new Set(),
    hiddenTypes: new Set(),
    categories: new Map(),  // colour rule value -> its colour
    expandGroup,
    openRuns,
  };
  g.measure.font = `${MEMKIT_CAPTION_PX}px sans-serif`;
  const { root, canvas, message, sizeBy, colourBy, search } = g;
  let needsFit = false;
  let firstDrawn = false;

  function say(text) { message.textContent = text; }

  function select(id, more) {
    root.dataset.selected = id || "";
    if (g.nodes) memkitSpotlight(g, id, more);
    memkitShowProps(g, id);
    model.set("selected_id", id);
    model.save_changes();
  }

  function find() {
    const q = search.value.trim().toLowerCase();
    if (!q) return;
    const visible = g.nodes.get({ filter: (n) => !n.hidden });
    const text = (n) => n.caption.toLowerCase();
    const hit = visible.find((n) => text(n) === q) || visible.find((n) => text(n).startsWith(q))
      || visible.find((n) => text(n).includes(q));
    if (!hit) {
      if (!model.isStatic) { say("searching the whole graph…"); model.send({ event: "find", query: search.value.trim() }); return; }
      say(`no node matches "${search.value.trim()}"`);
      return;
    }
    focus(hit.id);
    say(`found ${hit.type} "${hit.caption}"`);
  }

  function focus(id) {  // centre on a node, highlight it and open its properties
    g.network.selectNodes([id]);
    g.network.focus(id, { scale: Math.max(g.network.getScale(), 1.2), animation: false });
    root.dataset.focused = id;
    select(id);
  }

  // -- opening groups ------------------------------------------------------------------------

  function expandGroup(id) {
    const n = g.nodes.get(id);
    if (!n || !n.group) return;
    const offset = g.opened.get(id) || 0;
    if (offset >= n.count) return;
    if (model.isStatic) {  // a saved page carries each group's first page
      if (!(g.data.reserve && g.data.reserve.groups[id]) || offset > 0) {
        say("the rest of this group needs the live widget (memkit.widgets.GraphExplorer)");
        return;
      }
      openReserved(g.data.reserve, id, n, "more in the live widget");
      return;
    }
    // The live widget's copy of each drawn group's first page, set by the kernel after the drawing,
    // so a first click opens a group without waiting for the kernel.
    const reserved = model.get("reserve");
    if (offset === 0 && reserved && reserved.groups && reserved.groups[id]) {
      openReserved(reserved, id, n, "more in it (its panel shows more)");
      model.send({ event: "opened", id });  // the kernel notes what is drawn now
      return;
    }
    say("opening…");
    root.dataset.opening = id;
    model.send({ event: "open", id, offset });
  }

  function openReserved(r, id, n, more) {
    const kept = r.groups[id];
    root.dataset.fromReserve = String(Number(root.dataset.fromReserve || 0) + 1);  // opened without the kernel
    expanded({
      event: "expanded", id, group: id, shown: kept.shown,
      nodes: kept.ids.map((i) => ({ ...r.nodes[i], offset: kept.offsets[i] })),
      edges: kept.edges.map((e) => ({ ...r.edges[e] })),
      message: `${kept.ids.length} new node${kept.ids.length === 1 ? "" : "s"} from ${n.type.toLowerCase()}` +
        (n.count > kept.shown ? `; ${(n.count - kept.shown).toLocaleString()} ${more}` : ""),
    });
  }

  function openRuns(memoryId, traces) {
    if (model.isStatic) { say("opening runs needs the live widget (memkit.widgets.GraphExplorer in Jupyter)"); return; }
    say("opening the runs…");
    model.send({ event: "runs", id: memoryId, traces });
  }

  function expanded(msg) {
    const t0 = performance.now();
    const { network, nodes, edges } = g;
    const anchor = msg.anchor && nodes.get(msg.anchor) ? msg.anchor : msg.id;
    let parent = (nodes.get(anchor) && network.getPositions([anchor])[anchor]) || { x: 0, y: 0 };
    if (msg.beside) {  // runs go to the right of everything drawn, not on top of it
      const all = Object.values(network.getPositions());
      parent = { x: Math.max(...all.map((p) => p.x)) + 250, y: Math.min(...all.map((p) => p.y)) };
    }
    const fresh = msg.nodes.filter((n) => nodes.get(n.id) === null);
    fresh.forEach((n, i) => {
      if (Array.isArray(n.offset)) {
        n.x = parent.x + n.offset[0];
        n.y = parent.y + n.offset[1];
      } else {
        const angle = (2 * Math.PI * i) / Math.max(fresh.length, 1);
        n.x = parent.x + 160 * Math.cos(angle);
        n.y = parent.y + 160 * Math.sin(angle);
      }
      n.hidden = g.hiddenTypes.has(memkitLegendKey(n));
    });
    memkitBatch(network, () => {
      nodes.add(fresh.map((n) => prepare(n)));
      if (msg.move) {  // nodes already drawn that belong in the new picture
        nodes.update(Object.entries(msg.move).filter(([id]) => nodes.get(id) !== null)
          .map(([id, [dx, dy]]) => ({ id, x: parent.x + dx, y: parent.y + dy })));
      }
      edges.update(msg.edges.map(edgeBase));
    });
    memkitSeparate(g, new Set(fresh.map((n) => n.id)));  // what arrives makes room for itself; the rest stays put
    if (msg.group) g.opened.set(msg.group, msg.shown);
    root.dataset.expanded = String(Number(root.dataset.expanded || 0) + fresh.length);
    memkitRerank(g);
    memkitRenderLegend(g);
    say(msg.message);
    root.dataset.opening = "";
    root.dataset.lastOpenMs = String(performance.now() - t0);
    if (msg.focus && msg.focus.length) {
      const focusIds = msg.focus.filter((i) => nodes.get(i) !== null);
      network.fit({ nodes: focusIds, animation: false });
      root.dataset.focused = msg.focus[0];
      select(msg.focus[0], focusIds);
      network.selectNodes([msg.focus[0]]);
    } else if (msg.group && network.getSelectedNodes()[0] === msg.group) {
      memkitShowProps(g, msg.group);
    }
    root.dataset.opened = String(Number(root.dataset.opened || 0) + 1);
  }

  function edgeBase(e) {
    e.base = { color: (e.color && e.color.color) || "#b0b7c3" };
    e.base.highlight = e.base.color;  // a selected node's edges keep their meaning (purple stays purple)
    e.base.hover = e.base.color;
    e.color = { ...e.base, opacity: 1 };
    return e;
  }

  function prepare(n) {
    const { props: rows, offset, ...node } = n;
    g.props.set(n.id, rows);
    node.caption = n.label;
    node.label = undefined;  // drawn by memkitDrawCaptions
    node.rank = n.group ? 1e6 + (n.count || 0) : (n.degree || 0) + (n.type === "Memory" ? 0 : 0.5);
    node.base = { size: n.size, color: n.color };
    Object.assign(node, memkitStyled(g, node));
    return node;
  }

  // -- drawing -------------------------------------------------------------------------------

  function settled() {
    if (message.textContent.startsWith("drawing ")) say("");
    const mark = () => {
      root.dataset.settled = "1";
      window.__memkitGraphSettled = performance.now();
    };
    if (canvas.clientWidth === 0) {  // drawn in a hidden tab: arranged and fitted when it is shown
      memkitSeparate(g);
      needsFit = true;
      mark();
      return;
    }
    g.network.once("afterDrawing", mark);  // settled means drawn where it will stay
    memkitArrange(g);
    g.network.redraw();
  }

  function draw(d) {
    g.data = d;
    if (g.network) g.network.destroy();
    g.hiddenTypes.clear();
    g.spot = null;
    g.opened.clear();
    g.pinned.clear();
    firstDrawn = false;
    root.dataset.settled = "";
    root.dataset.expanded = "0";
    root.dataset.opened = "0";
    root.dataset.hidden = "";
    root.dataset.focused = "";
    g.titleLine.textContent = d.title || "";
    g.note.textContent = d.message || "";
    say("");
    g.props.clear();
    g.widths.clear();
    g.categories.clear();
    const large = d.nodes.length > MEMKIT_LARGE;
    root.dataset.sizeBy = sizeBy.value;
    root.dataset.colourBy = colourBy.value;
    const all = d.nodes.map((n) => prepare(n));
    // A large graph goes in by chunks, one task each, so the page never freezes while it loads.
    const nodes = g.nodes = new vis.DataSet(large ? [] : all);
    d.edges.forEach(edgeBase);
    const edges = g.edges = new vis.DataSet(large ? [] : d.edges);
    const network = g.network = new vis.Network(canvas, { nodes, edges }, memkitOptions(d));
    network.on("beforeDrawing", (ctx) => {  // an opaque background: the PNG export is what is seen
      ctx.save();
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, 0, ctx.canvas.width, ctx.canvas.height);
      ctx.restore();
    });
    network.on("afterDrawing", (ctx) => {
      memkitDrawSpotlight(g, ctx);
      memkitDrawCaptions(g, ctx);
      if (!firstDrawn) { firstDrawn = true; window.__memkitGraphFirstDrawn = performance.now(); root.dataset.drawn = "1"; }
    });
    if (large) {
      const chunk = 1500;
      network.body.emitter.emit("_blockRedraw");  // one drawing at the end, not one per chunk
      const jobs = [];
      for (let i = 0; i < all.length; i += chunk) jobs.push(() => nodes.add(all.slice(i, i + chunk)));
      for (let i = 0; i < d.edges.length; i += chunk * 2) jobs.push(() => edges.add(d.edges.slice(i, i + chunk * 2)));
      const run = () => {
        const job = jobs.shift();
        if (job) { job(); setTimeout(run, 0); return; }
        memkitRerank(g);
        network.body.emitter.emit("_allowRedraw");
        network.once("afterDrawing", settled);
        network.redraw();
      };
      say(`drawing ${all.length.toLocaleString()} nodes…`);
      setTimeout(run, 0);
    } else if (d.physics && d.animate) {
      let done = false;
      const stop = () => {
        if (done) return;
        done = true;
        network.setOptions({ physics: { enabled: false } });
        settled();
      };
      network.once("stabilized", stop);
      setTimeout(stop, d.settle_ms || 2500);  // never longer: a still picture beats a drifting one
      network.once("afterDrawing", () => memkitFitAll(g));
    } else if (d.physics) {
      network.once("stabilizationIterationsDone", () => { network.setOptions({ physics: { enabled: false } }); settled(); });
    } else {
      network.once("afterDrawing", settled);
    }
    if (!large) memkitRerank(g);
    network.on("click", (p) => {
      const id = p.nodes.length ? p.nodes[0] : null;
      select(id);
      const n = id === null ? null : nodes.get(id);
      if (n && n.group && !g.opened.get(id)) expandGroup(id);
    });
    network.on("doubleClick", (p) => {
      if (!p.nodes.length) return;
      if (model.isStatic) { say("expanding a node needs the live widget (memkit.widgets.GraphExplorer in Jupyter)"); return; }
      say("expanding…");
      model.send({ event: "expand", id: p.nodes[0] });
    });
    network.on("dragEnd", (p) => {  // a dragged node stays where it was put
      for (const id of p.nodes) { g.pinned.add(id); nodes.update({ id, fixed: { x: true, y: true } }); }
      if (p.nodes.length) { root.dataset.pinned = String(g.pinned.size); memkitShowProps(g, p.nodes[0]); }
    });
    memkitRenderLegend(g);
    memkitShowProps(g, null);
    root.__memkit = { network, nodes, edges, captions: () => g.drawnCaptions };
    root.__open = expanded;  // what a kernel reply does, for the benchmark
  }

  function exportPng() {
    const surface = canvas.querySelector("canvas");
    if (!surface) return;
    const link = document.createElement("a");
    link.download = `${(g.data && g.data.title ? g.data.title : "memkit graph").replace(/[^\w.-]+/g, "_")}.png`;
    link.href = surface.toDataURL("image/png");
    link.click();
    root.dataset.exported = String(Number(root.dataset.exported || 0) + 1);
  }

  search.addEventListener("keydown", (e) => { if (e.key === "Enter") find(); });
  g.fitButton.addEventListener("click", () => g.network && memkitFitAll(g));
  g.fitSelection.addEventListener("click", () => {
    const { network, nodes } = g;
    if (!network) return;
    const chosen = network.getSelectedNodes();
    if (!chosen.length) { say("select a node first"); return; }
    // an opened group's members, not every group it links to: close enough to read their captions
    const around = new Set(chosen);
    for (const id of chosen) {
      const near = network.getConnectedNodes(id);
      const members = g.opened.get(id) ? near.filter((o) => !(nodes.get(o) || {}).group) : [];
      for (const other of members.length ? members : near) around.add(other);
    }
    network.fit({ nodes: [...around].filter((i) => !nodes.get(i).hidden), animation: false });
  });
  g.resetButton.addEventListener("click", () => draw(model.get("data")));
  g.pngButton.addEventListener("click", exportPng);
  const onRule = () => {
    if (!g.nodes) return;
    memkitRestyle(g);
    model.set("style", { size_by: sizeBy.value, color_by: colourBy.value });
    model.save_changes();
  };
  sizeBy.addEventListener("change", onRule);
  colourBy.addEventListener("change", onRule);
  const onMsg = (msg) => {
    if (msg && msg.event === "expanded") expanded(msg);
    else if (msg && msg.event === "error") { say(msg.message); root.dataset.opening = ""; }
  };
  const onData = () => draw(model.get("data"));
  const onStyle = () => { memkitApplyStyle(g, model.get("style")); if (g.nodes) memkitRestyle(g); };
  model.on("msg:custom", onMsg);
  model.on("change:data", onData);
  model.on("change:style", onStyle);

  // A graph drawn inside a hidden tab has no size: fit it when it first becomes visible.
  let wasHidden = canvas.clientWidth === 0;
  const observer = new ResizeObserver(() => {
    const hidden = canvas.clientWidth === 0;
    if (!hidden && g.network && (wasHidden || needsFit)) {
      g.network.redraw();
      memkitArrange(g);
      needsFit = false;
    }
    wasHidden = hidden;
  });
  observer.observe(canvas);

  memkitApplyStyle(g, model.get("style"));
  const first = model.get("data");
  if (first && first.nodes) draw(first);
  return () => {
    observer.disconnect();
    model.off("msg:custom", onMsg);
    model.off("change:data", onData);
    model.off("change:style", onStyle);
    if (g.network) g.network.destroy();
  };
}
