// memkit's graph view: one file for the live widget (anywidget) and the standalone page.
// Every piece of text from the store goes into the page through textContent, as a vis-network
// string title (shown with innerText) or drawn on the canvas: nothing is parsed as HTML.
// `model` is anywidget's model, or memkitStaticModel(data) in a saved page (no kernel).
//
// Captions are drawn here, not by vis-network: always 12 px on screen whatever the zoom, most
// connected (or largest group) first, and only where they do not overlap one already drawn, so
// a zoomed-out view names its hubs and the rest appear as you zoom in.

function memkitStaticModel(data) {
  return {
    isStatic: true,
    get(name) { return name === "data" ? data : name === "style" ? (data.style || {}) : null; },
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

  const HINT = "Click a node to see its properties (a group opens); double-click to fetch its neighbours.";
  const CAPTION_PX = 12;  // on screen, at every zoom
  const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
                   "#999999", "#882255", "#44AA99", "#117733"];
  let network = null;
  let nodes = null;
  let edges = null;
  let data = null;
  let needsFit = false;
  let ranked = [];  // node ids, the ones whose captions matter most first
  let drawnCaptions = [];
  let firstDrawn = false;
  const props = new Map();  // node id -> properties, kept out of vis-network's DataSet (it copies every field)
  const widths = new Map();  // node id -> caption width in px at CAPTION_PX
  const opened = new Map();  // group id -> members shown so far
  const pinned = new Set();
  const LARGE = 2500;  // above this many nodes: no arrows, edges hidden on zoom
  const hiddenTypes = new Set();
  const legendKey = (n) => (n.failed ? "Step:failed" : n.deleted ? "Memory:deleted" : n.type);
  const KEY_LABELS = { "Step:failed": "failed step", "Memory:deleted": "deleted memory", Group: "other memories" };
  const measure = document.createElement("canvas").getContext("2d");
  measure.font = `${CAPTION_PX}px sans-serif`;

  function say(text) { message.textContent = text; }

  function options(d) {
    const large = d.nodes.length > LARGE;
    return {
      layout: { improvedLayout: false },
      physics: {
        enabled: !!d.physics, solver: "barnesHut",
        barnesHut: { gravitationalConstant: -6000, springLength: 130, springConstant: 0.04, damping: 0.5,
                     avoidOverlap: 0.3 },
        // an animated layout is drawn at once from its start positions and settles on screen
        stabilization: { enabled: !d.animate, iterations: d.iterations || 100, updateInterval: 25, fit: true },
      },
      interaction: { hover: !large, tooltipDelay: 150, hideEdgesOnDrag: true, hideEdgesOnZoom: large },
      edges: { smooth: false, arrows: { to: { enabled: !large, scaleFactor: 0.4 } }, color: { color: "#b0b7c3" } },
      nodes: { font: { size: 12, face: "sans-serif" } },
    };
  }

  // -- captions ------------------------------------------------------------------------------

  function rerank() {
    const all = nodes.get({ fields: ["id", "rank", "caption"] });
    all.sort((a, b) => b.rank - a.rank || (a.caption < b.caption ? -1 : 1));
    ranked = all.map((n) => n.id);
  }

  function captionWidth(id, text) {
    let w = widths.get(id);
    if (w === undefined) { w = measure.measureText(text).width; widths.set(id, w); }
    return w;
  }

  // The radius a node takes on the canvas (canvas units): its shape's size and its border.
  function nodeRadius(n) { return (n.options.size || 10) + (n.options.borderWidth || 1); }

  // Nodes pushed apart until none overlaps another (60 passes, then a free spot for any left). Physics' avoidOverlap only
  // weakens the pull between linked hubs, so a dense centre kept nodes over nodes and a click on one
  // opened its neighbour. Each node is a box; with `scale` (the zoom it will be seen at) the
  // NAMED most important nodes' boxes hold their caption under them too, so the hubs of a
  // crowded centre keep room to be named. `movable`: the ids that may move (all when omitted).
  // SPACED: above this many drawn nodes the layout is drawn as computed (the pairwise work would
  // hold the page for seconds; a drawing that large is read by zooming anyway).
  const GAP = 6, NAMED = 40, SPACED = 600;
  function separate(movable, scale) {
    const body = network.body.nodes;
    const ids = nodes.getIds({ filter: (n) => !n.hidden }).filter((id) => body[id]);
    if (!ids.length || ids.length > SPACED) return 0;
    const named = new Set(scale ? ranked.filter((id) => body[id] && !body[id].options.hidden).slice(0, NAMED) : []);
    const items = ids.map((id) => {
      const n = body[id], r = nodeRadius(n), text = named.has(id) && n.options.caption;
      const half = text ? Math.max(r, (captionWidth(id, text) / 2 + 4) / scale) : r;
      return { id, x: n.x, y: n.y, hw: half, up: r, down: text ? r + (CAPTION_PX + 6) / scale : r,
        move: !movable || movable.has(id) };
    });
    const cell = 2 * Math.max(...items.map((i) => Math.max(i.hw, i.down))) + GAP;
    const moved = new Set();
    const cellKey = (gx, gy) => gx * 65536 + gy;
    for (let round = 0; round < 60; round++) {
      const grid = new Map();
      items.forEach((it, k) => {
        const key = cellKey(Math.floor(it.x / cell), Math.floor(it.y / cell));
        const list = grid.get(key);
        if (list) list.push(k); else grid.set(key, [k]);
      });
      let overlaps = 0;
      items.forEach((a, k) => {
        const gx = Math.floor(a.x / cell), gy = Math.floor(a.y / cell);
        for (let i = gx - 1; i <= gx + 1; i++) {
          for (let j = gy - 1; j <= gy + 1; j++) {
            for (const m of grid.get(cellKey(i, j)) || []) {
              const b = items[m];
              if (m <= k || (!a.move && !b.move)) continue;
              const ox = Math.min(a.x + a.hw, b.x + b.hw) - Math.max(a.x - a.hw, b.x - b.hw) + GAP;
              const oy = Math.min(a.y + a.down, b.y + b.down) - Math.max(a.y - a.up, b.y - b.up) + GAP;
              if (ox <= 0 || oy <= 0) continue;
              overlaps += 1;
              // along the shorter way out; two nodes at one spot part in a direction of their own
              let dx = 0, dy = 0;
              if (ox < oy) dx = (b.x > a.x || (b.x === a.x && m % 2) ? 1 : -1) * (ox + 0.5);
              else dy = (b.y > a.y || (b.y === a.y && m % 2) ? 1 : -1) * (oy + 0.5);
              const share = a.move && b.move ? 0.5 : 1;
              if (a.move) { a.x -= dx * share; a.y -= dy * share; moved.add(a); }
              if (b.move) { b.x += dx * share; b.y += dy * share; moved.add(b); }
            }
          }
        }
      });
      if (!overlaps) break;
    }
    // One squeezed between nodes that stay put can swing between them: it goes to the nearest free
    // spot on a spiral around where it is.
    const clash = (a, b, x, y) => Math.min(x + a.hw, b.x + b.hw) - Math.max(x - a.hw, b.x - b.hw) + GAP > 0
      && Math.min(y + a.down, b.y + b.down) - Math.max(y - a.up, b.y - b.up) + GAP > 0;
    for (const a of items) {
      if (!a.move || !items.some((b) => b !== a && clash(a, b, a.x, a.y))) continue;
      const step = Math.max(a.hw, a.down) + GAP;
      for (let t = 1; t < 400; t++) {
        const x = a.x + step * Math.sqrt(t) * Math.cos(t * 2.39996), y = a.y + step * Math.sqrt(t) * Math.sin(t * 2.39996);
        if (!items.some((b) => b !== a && clash(a, b, x, y))) { a.x = x; a.y = y; moved.add(a); break; }
      }
    }
    for (const it of moved) network.moveNode(it.id, it.x, it.y);
    return moved.size;
  }

  // Room for every node, then for the main captions at the zoom the fit will show (which shrinks
  // as the drawing grows: a few rounds), then the fit.
  function arrange() {
    const t0 = performance.now();
    let moved = separate();
    if (canvas.clientWidth && canvas.clientHeight) {
      for (let round = 0; round < 3; round++) {
        fitAll();
        const more = separate(null, network.getScale());
        moved += more;
        if (!more) break;
      }
      moved += separate();  // whatever the caption rounds left: no node on another
      fitAll();
    }
    root.dataset.separated = String(moved);
    root.dataset.arrangeMs = String(Math.round(performance.now() - t0));  // what bench/graph_view.py reads
    return moved;
  }

  // Fit every drawn node and the caption under it inside the canvas. vis-network's fit counts the
  // nodes only, so a caption at the rim was cut at the canvas edge.
  function fitAll() {
    network.fit({ animation: false });
    const W = canvas.clientWidth, H = canvas.clientHeight, pad = 4;
    if (!W || !H) return;
    const body = network.body.nodes;
    const items = [];
    for (const id of network.body.nodeIndices) {
      const n = body[id];
      if (!n || n.options.hidden) continue;
      const text = n.options.caption;
      items.push([n.x, n.y, nodeRadius(n), text ? captionWidth(id, text) / 2 + 2 : 0, text ? CAPTION_PX + 4 : 0]);
    }
    if (!items.length) return;
    const extent = (s) => {
      let l = Infinity, r = -Infinity, t = Infinity, b = -Infinity;
      for (const [x, y, rad, half, below] of items) {
        const side = Math.max(rad * s, half);
        l = Math.min(l, x * s - side); r = Math.max(r, x * s + side);
        t = Math.min(t, y * s - rad * s); b = Math.max(b, y * s + rad * s + below);
      }
      return [l, r, t, b];
    };
    const fits = (s) => { const [l, r, t, b] = extent(s); return r - l <= W - 2 * pad && b - t <= H - 2 * pad; };
    let hi = network.getScale(), lo = hi / 64;
    if (!fits(hi)) {
      for (let i = 0; i < 30; i++) { const mid = (lo + hi) / 2; if (fits(mid)) lo = mid; else hi = mid; }
      hi = lo;
    }
    const [l, r, t, b] = extent(hi);
    network.moveTo({ position: { x: (l + r) / 2 / hi, y: (t + b) / 2 / hi }, scale: hi, animation: false });
    root.dataset.fitScale = String(hi);
  }

  function drawCaptions(ctx) {
    const scale = network.getScale();
    const w = canvas.clientWidth, hgt = canvas.clientHeight;
    const tl = network.DOMtoCanvas({ x: 0, y: 0 });
    const size = CAPTION_PX / scale;
    const grid = new Map();
    const cell = 48;
    const free = (x0, y0, x1, y1) => {
      for (let gx = Math.floor(x0 / cell); gx <= Math.floor(x1 / cell); gx++) {
        for (let gy = Math.floor(y0 / cell); gy <= Math.floor(y1 / cell); gy++) {
          for (const b of grid.get(`${gx},${gy}`) || []) {
            if (b[0] < x1 && x0 < b[2] && b[1] < y1 && y0 < b[3]) return false;
          }
        }
      }
      return true;
    };
    const take = (box) => {
      for (let gx = Math.floor(box[0] / cell); gx <= Math.floor(box[2] / cell); gx++) {
        for (let gy = Math.floor(box[1] / cell); gy <= Math.floor(box[3] / cell); gy++) {
          const k = `${gx},${gy}`;
          if (!grid.has(k)) grid.set(k, []);
          grid.get(k).push(box);
        }
      }
    };
    const first = [];
    // the selection and what it connects to (an opened group's members) are named before any hub
    const chosen = network.getSelectedNodes();
    for (const id of chosen) first.push(id);
    if (root.dataset.focused) first.push(root.dataset.focused);
    // an opened group's own members (not the groups it links to) first
    for (const id of chosen) {
      const near = network.getConnectedNodes(id).slice(0, 150);
      const member = (o) => !(nodes.get(o) || { group: true }).group;
      first.push(...near.filter(member), ...near.filter((o) => !member(o)));
    }
    const bodyNodes = network.body.nodes;
    // Every node on screen is room no caption may take: a caption is never drawn over a node.
    for (const id of network.body.nodeIndices) {
      const n = bodyNodes[id];
      if (!n || n.options.hidden) continue;
      const sx = (n.x - tl.x) * scale, sy = (n.y - tl.y) * scale, r = nodeRadius(n) * scale;
      if (sx + r < 0 || sy + r < 0 || sx - r > w || sy - r > hgt) continue;
      take([sx - r, sy - r, sx + r, sy + r]);
    }
    const out = [];
    ctx.save();
    ctx.font = `${size}px sans-serif`;
    ctx.textBaseline = "top";
    ctx.lineJoin = "round";
    ctx.lineWidth = 3 / scale;
    ctx.strokeStyle = "rgba(255,255,255,0.9)";
    ctx.fillStyle = "#1f2328";
    const seen = new Set();
    const H = CAPTION_PX + 3;
    for (const id of first.concat(ranked)) {
      if (seen.has(id)) continue;
      seen.add(id);
      const n = bodyNodes[id];
      if (!n || n.options.hidden) continue;
      const text = n.options.caption;
      if (!text) continue;
      const sx = (n.x - tl.x) * scale, sy = (n.y - tl.y) * scale;
      const r = nodeRadius(n) * scale;
      if (sx < -50 || sy < -50 || sx > w + 50 || sy > hgt + 50) continue;
      const tw = captionWidth(id, text) + 4;
      // under the node, else over it, else beside it; always whole inside the canvas, never on a node
      const spots = [[sx - tw / 2, sy + r + 1], [sx - tw / 2, sy - r - 1 - H], [sx + r + 2, sy - H / 2],
                     [sx - r - 2 - tw, sy - H / 2]];
      const spotAt = spots.find(([x, y]) => x >= 0 && y >= 0 && x + tw <= w && y + H <= hgt && free(x, y, x + tw, y + H));
      if (!spotAt) continue;
      const box = [spotAt[0], spotAt[1], spotAt[0] + tw, spotAt[1] + H];
      take(box);
      const cx = tl.x + (box[0] + 2) / scale, cy = tl.y + (box[1] + 1) / scale;
      ctx.strokeText(text, cx, cy);
      ctx.fillText(text, cx, cy);
      out.push({ id, text, px: size * scale, x: sx, y: box[1], box });
      if (out.length >= 600) break;
    }
    ctx.restore();
    drawnCaptions = out;
    root.dataset.captions = String(out.length);
  }

  // -- legend, styling rules -----------------------------------------------------------------

  function renderLegend() {
    legendBox.replaceChildren();
    const total = {}, visible = {};
    let drawn = 0;
    nodes.forEach((n) => {
      const k = legendKey(n);
      total[k] = (total[k] || 0) + 1;
      if (!n.hidden) { visible[k] = (visible[k] || 0) + 1; drawn += 1; }
    });
    for (const item of data.legend.concat(extraLegend())) {
      const chip = make("button", "memkit-graph-chip");
      chip.dataset.type = item.type;
      const dot = make("span", "memkit-graph-dot");
      dot.style.background = item.color;
      const shown = visible[item.type] || 0, all = total[item.type] || 0;
      const text = shown === all ? `${item.label} (${all})` : `${item.label} (${shown} of ${all})`;
      chip.append(dot, make("span", "memkit-graph-chip-label", text));
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
    legendBox.append(make("span", "memkit-graph-drawn", `${drawn.toLocaleString()} drawn`));
    if (colourBy.value !== "type") {
      const key = make("span", "memkit-graph-colour-key");
      for (const [value, colour] of categories.entries()) {
        const dot = make("span", "memkit-graph-dot");
        dot.style.background = colour;
        key.append(dot, make("span", "", value));
      }
      legendBox.append(key);
    }
  }

  function extraLegend() {  // types that arrived by expanding
    const known = new Set(data.legend.map((i) => i.type));
    const out = [];
    nodes.forEach((n) => {
      const k = legendKey(n);
      if (!known.has(k)) { known.add(k); out.push({ type: k, label: KEY_LABELS[k] || k, color: n.base.color.background }); }
    });
    return out;
  }

  function toggle(type) {
    if (hiddenTypes.has(type)) hiddenTypes.delete(type); else hiddenTypes.add(type);
    nodes.update(nodes.get().map((n) => ({ id: n.id, hidden: hiddenTypes.has(legendKey(n)) })));
    root.dataset.hidden = Array.from(hiddenTypes).sort().join(",");
    renderLegend();
  }

  const categories = new Map();
  function styled(n) {  // the size and colour the current rules give a node
    const rule = sizeBy.value;
    const value = rule === "type" ? null : Number(n[rule] || 0);
    const size = value === null ? n.base.size : Math.round((5 + 2.5 * Math.log2(1 + value)) * 10) / 10;
    if (colourBy.value === "type") return { size, color: n.base.color };
    const key = String(n[colourBy.value] || "");
    if (!categories.has(key)) categories.set(key, PALETTE[categories.size % PALETTE.length]);
    const c = categories.get(key);
    return { size, color: { background: c, border: c, highlight: { background: c, border: "#000000" } } };
  }

  function restyle() {
    categories.clear();
    nodes.update(nodes.get().map((n) => ({ id: n.id, ...styled(n) })));
    root.dataset.sizeBy = sizeBy.value;
    root.dataset.colourBy = colourBy.value;
    renderLegend();
  }

  function applyStyle(style) {
    if (style && style.size_by) sizeBy.value = style.size_by;
    if (style && style.color_by) colourBy.value = style.color_by;
  }

  // -- properties panel ----------------------------------------------------------------------

  function showProps(id) {
    panel.replaceChildren();
    const n = id === null ? null : nodes.get(id);
    if (!n) {
      panel.append(make("div", "memkit-graph-props-empty", HINT));
      return;
    }
    panel.append(make("div", "memkit-graph-props-title", n.caption));
    if (n.group) {
      const shown = opened.get(n.id) || 0;
      const what = n.type === "Workflow" ? "runs" : n.type === "Trace" ? "steps" : n.type === "Tool" ? "steps" : "memories";
      const line = make("div", "memkit-graph-group", shown
        ? `${Math.min(shown, n.count).toLocaleString()} of ${n.count.toLocaleString()} ${what} shown`
        : `${n.count.toLocaleString()} ${what}; click to open`);
      panel.append(line);
      if (shown < n.count) {
        const more = make("button", "memkit-graph-more", shown ? "show more" : "open");
        more.addEventListener("click", () => expandGroup(n.id));
        panel.append(more);
      }
    }
    if (n.used_by && n.used_by.length) {
      const box = make("div", "memkit-graph-used-by");
      box.append(make("div", "memkit-graph-section", `used by ${n.used_by.length} run${n.used_by.length === 1 ? "" : "s"}`));
      for (const [, label] of n.used_by.slice(0, 12)) box.append(make("div", "memkit-graph-run", label));
      const open = make("button", "memkit-graph-open-runs",
        n.used_by.length > 6 ? "open the 6 most recent runs" : "open these runs");
      open.addEventListener("click", () => openRuns(n.id, n.used_by.map((r) => r[0])));
      box.append(open);
      panel.append(box);
    } else if (n.type === "Memory") {
      panel.append(make("div", "memkit-graph-used-by memkit-graph-props-hint", "no recorded run recalled this memory"));
    }
    if (pinned.has(n.id)) {
      const unpin = make("button", "memkit-graph-unpin", "unpin");
      unpin.addEventListener("click", () => { pinned.delete(n.id); nodes.update({ id: n.id, fixed: false }); showProps(n.id); });
      panel.append(unpin);
    }
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
    if (!model.isStatic) panel.append(make("div", "memkit-graph-props-hint", "double-click the node to fetch its neighbours"));
  }

  // A selected node and its neighbours stay as they are; everything else fades, so an opened group
  // reads on its own even inside a dense drawing. The fade is painted over the drawing (a white veil,
  // then the lit edges and nodes drawn again on top of it) rather than written into every node and
  // edge: updating each item through vis-network's DataSet took longer than the rest of a click.
  let spot = null;  // the ids at the centre of the light, or null
  function spotlight(id, more) {
    if (id === null && spot === null) return;
    spot = id === null ? null : new Set([id, ...(more || [])]);
    root.dataset.spotlight = id || "";
    if (network) network.body.emitter.emit("_requestRedraw");
  }

  function drawSpotlight(ctx) {
    if (spot === null) return;
    const body = network.body;
    const near = new Set(spot), lit = new Set();
    for (const c of spot) {
      if (!body.nodes[c]) continue;
      for (const e of network.getConnectedEdges(c)) lit.add(e);
      for (const o of network.getConnectedNodes(c)) near.add(o);
    }
    ctx.save();
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.fillStyle = "rgba(255,255,255,0.8)";
    ctx.fillRect(0, 0, ctx.canvas.width, ctx.canvas.height);
    ctx.restore();
    const shown = (n) => n && !n.options.hidden;
    for (const id of lit) {
      const e = body.edges[id];
      if (e && e.connected && shown(e.from) && shown(e.to)) { e.draw(ctx); e.drawArrows(ctx); }
    }
    for (const id of near) if (shown(body.nodes[id])) body.nodes[id].draw(ctx);
    root.dataset.lit = String(near.size);
  }

  function select(id, more) {
    root.dataset.selected = id || "";
    if (nodes) spotlight(id, more);
    showProps(id);
    model.set("selected_id", id);
    model.save_changes();
  }

  function find() {
    const q = search.value.trim().toLowerCase();
    if (!q) return;
    const visible = nodes.get({ filter: (n) => !n.hidden });
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
    network.selectNodes([id]);
    network.focus(id, { scale: Math.max(network.getScale(), 1.2), animation: false });
    root.dataset.focused = id;
    select(id);
  }

  // -- opening groups ------------------------------------------------------------------------

  function expandGroup(id) {
    const n = nodes.get(id);
    if (!n || !n.group) return;
    const offset = opened.get(id) || 0;
    if (offset >= n.count) return;
    if (model.isStatic) {  // a saved page carries each group's first page
      if (!(data.reserve && data.reserve.groups[id]) || offset > 0) {
        say("the rest of this group needs the live widget (memkit.widgets.GraphExplorer)");
        return;
      }
      openReserved(data.reserve, id, n, "more in the live widget");
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
      n.hidden = hiddenTypes.has(legendKey(n));
    });
    batch(() => {
      nodes.add(fresh.map((n) => prepare(n)));
      if (msg.move) {  // nodes already drawn that belong in the new picture
        nodes.update(Object.entries(msg.move).filter(([id]) => nodes.get(id) !== null)
          .map(([id, [dx, dy]]) => ({ id, x: parent.x + dx, y: parent.y + dy })));
      }
      edges.update(msg.edges.map(edgeBase));
    });
    separate(new Set(fresh.map((n) => n.id)));  // what arrives makes room for itself; the rest stays put
    if (msg.group) opened.set(msg.group, msg.shown);
    root.dataset.expanded = String(Number(root.dataset.expanded || 0) + fresh.length);
    rerank();
    renderLegend();
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
      showProps(msg.group);
    }
    root.dataset.opened = String(Number(root.dataset.opened || 0) + 1);
  }

  // After each DataSet change vis-network redoes its bookkeeping over every node and edge (edge
  // state, clusters, visible indices, value ranges) and, physics being off, draws everything at once.
  // A batch of changes pays for the bookkeeping once and is drawn on the next frame.
  function batch(work) {
    const emitter = network.body.emitter;
    const own = Object.prototype.hasOwnProperty.call(emitter, "emit"), emit = emitter.emit;
    const held = new Set();
    let flushing = false;
    emitter.emit = function (event, ...args) {
      if (event === "_redraw" || (!flushing && (event === "_dataChanged" || event === "_dataUpdated"))) {
        held.add(event);
        return this;
      }
      return emit.apply(this, [event, ...args]);
    };
    try {
      work();
      flushing = true;
      if (held.has("_dataChanged")) emitter.emit("_dataChanged");
      else if (held.has("_dataUpdated")) emitter.emit("_dataUpdated");
    } finally {
      if (own) emitter.emit = emit; else delete emitter.emit;
    }
    if (held.size) emitter.emit("_requestRedraw");
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
    props.set(n.id, rows);
    node.caption = n.label;
    node.label = undefined;  // drawn by drawCaptions
    node.rank = n.group ? 1e6 + (n.count || 0) : (n.degree || 0) + (n.type === "Memory" ? 0 : 0.5);
    node.base = { size: n.size, color: n.color };
    Object.assign(node, styled(node));
    return node;
  }

  function settled() {
    if (message.textContent.startsWith("drawing ")) say("");
    const mark = () => {
      root.dataset.settled = "1";
      window.__memkitGraphSettled = performance.now();
    };
    if (canvas.clientWidth === 0) {  // drawn in a hidden tab: arranged and fitted when it is shown
      separate();
      needsFit = true;
      mark();
      return;
    }
    network.once("afterDrawing", mark);  // settled means drawn where it will stay
    arrange();
    network.redraw();
  }

  function draw(d) {
    data = d;
    if (network) network.destroy();
    hiddenTypes.clear();
    spot = null;
    opened.clear();
    pinned.clear();
    firstDrawn = false;
    root.dataset.settled = "";
    root.dataset.expanded = "0";
    root.dataset.opened = "0";
    root.dataset.hidden = "";
    root.dataset.focused = "";
    titleLine.textContent = d.title || "";
    note.textContent = d.message || "";
    say("");
    props.clear();
    widths.clear();
    categories.clear();
    const large = d.nodes.length > LARGE;
    root.dataset.sizeBy = sizeBy.value;
    root.dataset.colourBy = colourBy.value;
    const all = d.nodes.map((n) => prepare(n));
    // A large graph goes in by chunks, one task each, so the page never freezes while it loads.
    nodes = new vis.DataSet(large ? [] : all);
    d.edges.forEach(edgeBase);
    edges = new vis.DataSet(large ? [] : d.edges);
    network = new vis.Network(canvas, { nodes, edges }, options(d));
    network.on("beforeDrawing", (ctx) => {  // an opaque background: the PNG export is what is seen
      ctx.save();
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, 0, ctx.canvas.width, ctx.canvas.height);
      ctx.restore();
    });
    network.on("afterDrawing", (ctx) => {
      drawSpotlight(ctx);
      drawCaptions(ctx);
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
        rerank();
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
      network.once("afterDrawing", () => fitAll());
    } else if (d.physics) {
      network.once("stabilizationIterationsDone", () => { network.setOptions({ physics: { enabled: false } }); settled(); });
    } else {
      network.once("afterDrawing", settled);
    }
    if (!large) rerank();
    network.on("click", (p) => {
      const id = p.nodes.length ? p.nodes[0] : null;
      select(id);
      const n = id === null ? null : nodes.get(id);
      if (n && n.group && !opened.get(id)) expandGroup(id);
    });
    network.on("doubleClick", (p) => {
      if (!p.nodes.length) return;
      if (model.isStatic) { say("expanding a node needs the live widget (memkit.widgets.GraphExplorer in Jupyter)"); return; }
      say("expanding…");
      model.send({ event: "expand", id: p.nodes[0] });
    });
    network.on("dragEnd", (p) => {  // a dragged node stays where it was put
      for (const id of p.nodes) { pinned.add(id); nodes.update({ id, fixed: { x: true, y: true } }); }
      if (p.nodes.length) { root.dataset.pinned = String(pinned.size); showProps(p.nodes[0]); }
    });
    renderLegend();
    showProps(null);
    root.__memkit = { network, nodes, edges, captions: () => drawnCaptions };
    root.__open = expanded;  // what a kernel reply does, for the benchmark
  }

  function exportPng() {
    const surface = canvas.querySelector("canvas");
    if (!surface) return;
    const link = document.createElement("a");
    link.download = `${(data && data.title ? data.title : "memkit graph").replace(/[^\w.-]+/g, "_")}.png`;
    link.href = surface.toDataURL("image/png");
    link.click();
    root.dataset.exported = String(Number(root.dataset.exported || 0) + 1);
  }

  search.addEventListener("keydown", (e) => { if (e.key === "Enter") find(); });
  fitButton.addEventListener("click", () => network && fitAll());
  fitSelection.addEventListener("click", () => {
    if (!network) return;
    const chosen = network.getSelectedNodes();
    if (!chosen.length) { say("select a node first"); return; }
    // an opened group's members, not every group it links to: close enough to read their captions
    const around = new Set(chosen);
    for (const id of chosen) {
      const near = network.getConnectedNodes(id);
      const members = opened.get(id) ? near.filter((o) => !(nodes.get(o) || {}).group) : [];
      for (const other of members.length ? members : near) around.add(other);
    }
    network.fit({ nodes: [...around].filter((i) => !nodes.get(i).hidden), animation: false });
  });
  resetButton.addEventListener("click", () => draw(model.get("data")));
  pngButton.addEventListener("click", exportPng);
  const onRule = () => {
    if (!nodes) return;
    restyle();
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
  const onStyle = () => { applyStyle(model.get("style")); if (nodes) restyle(); };
  model.on("msg:custom", onMsg);
  model.on("change:data", onData);
  model.on("change:style", onStyle);

  // A graph drawn inside a hidden tab has no size: fit it when it first becomes visible.
  let wasHidden = canvas.clientWidth === 0;
  const observer = new ResizeObserver(() => {
    const hidden = canvas.clientWidth === 0;
    if (!hidden && network && (wasHidden || needsFit)) {
      network.redraw();
      arrange();
      needsFit = false;
    }
    wasHidden = hidden;
  });
  observer.observe(canvas);

  applyStyle(model.get("style"));
  const first = model.get("data");
  if (first && first.nodes) draw(first);
  return () => {
    observer.disconnect();
    model.off("msg:custom", onMsg);
    model.off("change:data", onData);
    model.off("change:style", onStyle);
    if (network) network.destroy();
  };
}
