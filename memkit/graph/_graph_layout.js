// memkit's graph view, where nodes go and what is painted over vis-network's drawing: nodes kept
// apart, the fit, the captions and the spotlight. With _graph_panel.js (the controls and the panels)
// and _graph.js (memkitGraph, which owns the state `g` all three work on), these files are one script.
// Every top-level name starts with memkit: in the saved page that script is a classic one, so each is a global.
//
// Captions are drawn here, not by vis-network: always 12 px on screen whatever the zoom, most
// connected (or largest group) first, and only where they do not overlap one already drawn, so
// a zoomed-out view names its hubs and the rest appear as you zoom in.

const MEMKIT_CAPTION_PX = 12;  // on screen, at every zoom
const MEMKIT_LARGE = 2500;  // above this many nodes: no arrows, edges hidden on zoom

function memkitOptions(d) {
  const large = d.nodes.length > MEMKIT_LARGE;
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

function memkitRerank(g) {
  const all = g.nodes.get({ fields: ["id", "rank", "caption"] });
  all.sort((a, b) => b.rank - a.rank || (a.caption < b.caption ? -1 : 1));
  g.ranked = all.map((n) => n.id);
}

function memkitCaptionWidth(g, id, text) {
  let w = g.widths.get(id);
  if (w === undefined) { w = g.measure.measureText(text).width; g.widths.set(id, w); }
  return w;
}

// The radius a node takes on the canvas (canvas units): its shape's size and its border.
function memkitNodeRadius(n) { return (n.options.size || 10) + (n.options.borderWidth || 1); }

// Nodes pushed apart until none overlaps another (60 passes, then a free spot for any left). Physics' avoidOverlap only
// weakens the pull between linked hubs, so a dense centre kept nodes over nodes and a click on one
// opened its neighbour. Each node is a box; with `scale` (the zoom it will be seen at) the
// NAMED most important nodes' boxes hold their caption under them too, so the hubs of a
// crowded centre keep room to be named. `movable`: the ids that may move (all when omitted).
// SPACED: above this many drawn nodes the layout is drawn as computed (the pairwise work would
// hold the page for seconds; a drawing that large is read by zooming anyway).
function memkitSeparate(g, movable, scale) {
  const GAP = 6, NAMED = 40, SPACED = 600;
  const network = g.network, body = network.body.nodes;
  const ids = g.nodes.getIds({ filter: (n) => !n.hidden }).filter((id) => body[id]);
  if (!ids.length || ids.length > SPACED) return 0;
  const named = new Set(scale ? g.ranked.filter((id) => body[id] && !body[id].options.hidden).slice(0, NAMED) : []);
  const items = ids.map((id) => {
    const n = body[id], r = memkitNodeRadius(n), text = named.has(id) && n.options.caption;
    const half = text ? Math.max(r, (memkitCaptionWidth(g, id, text) / 2 + 4) / scale) : r;
    return { id, x: n.x, y: n.y, hw: half, up: r, down: text ? r + (MEMKIT_CAPTION_PX + 6) / scale : r,
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
function memkitArrange(g) {
  const t0 = performance.now();
  let moved = memkitSeparate(g);
  if (g.canvas.clientWidth && g.canvas.clientHeight) {
    for (let round = 0; round < 3; round++) {
      memkitFitAll(g);
      const more = memkitSeparate(g, null, g.network.getScale());
      moved += more;
      if (!more) break;
    }
    moved += memkitSeparate(g);  // whatever the caption rounds left: no node on another
    memkitFitAll(g);
  }
  g.root.dataset.separated = String(moved);
  g.root.dataset.arrangeMs = String(Math.round(performance.now() - t0));  // what bench/graph_view.py reads
  return moved;
}

// Fit every drawn node and the caption under it inside the canvas. vis-network's fit counts the
// nodes only, so a caption at the rim was cut at the canvas edge.
function memkitFitAll(g) {
  const network = g.network;
  network.fit({ animation: false });
  const W = g.canvas.clientWidth, H = g.canvas.clientHeight, pad = 4;
  if (!W || !H) return;
  const body = network.body.nodes;
  const items = [];
  for (const id of network.body.nodeIndices) {
    const n = body[id];
    if (!n || n.options.hidden) continue;
    const text = n.options.caption;
    items.push([n.x, n.y, memkitNodeRadius(n), text ? memkitCaptionWidth(g, id, text) / 2 + 2 : 0,
                text ? MEMKIT_CAPTION_PX + 4 : 0]);
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
  g.root.dataset.fitScale = String(hi);
}

function memkitDrawCaptions(g, ctx) {
  const network = g.network, nodes = g.nodes;
  const scale = network.getScale();
  const w = g.canvas.clientWidth, hgt = g.canvas.clientHeight;
  const tl = network.DOMtoCanvas({ x: 0, y: 0 });
  const size = MEMKIT_CAPTION_PX / scale;
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
  if (g.root.dataset.focused) first.push(g.root.dataset.focused);
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
    const sx = (n.x - tl.x) * scale, sy = (n.y - tl.y) * scale, r = memkitNodeRadius(n) * scale;
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
  const H = MEMKIT_CAPTION_PX + 3;
  for (const id of first.concat(g.ranked)) {
    if (seen.has(id)) continue;
    seen.add(id);
    const n = bodyNodes[id];
    if (!n || n.options.hidden) continue;
    const text = n.options.caption;
    if (!text) continue;
    const sx = (n.x - tl.x) * scale, sy = (n.y - tl.y) * scale;
    const r = memkitNodeRadius(n) * scale;
    if (sx < -50 || sy < -50 || sx > w + 50 || sy > hgt + 50) continue;
    const tw = memkitCaptionWidth(g, id, text) + 4;
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
  g.drawnCaptions = out;
  g.root.dataset.captions = String(out.length);
}

// -- spotlight -----------------------------------------------------------------------------

// A selected node and its neighbours stay as they are; everything else fades, so an opened group
// reads on its own even inside a dense drawing. The fade is painted over the drawing (a white veil,
// then the lit edges and nodes drawn again on top of it) rather than written into every node and
// edge: updating each item through vis-network's DataSet took longer than the rest of a click.
// `g.spot`: the ids at the centre of the light, or null.
function memkitSpotlight(g, id, more) {
  if (id === null && g.spot === null) return;
  g.spot = id === null ? null : new Set([id, ...(more || [])]);
  g.root.dataset.spotlight = id || "";
  if (g.network) g.network.body.emitter.emit("_requestRedraw");
}

function memkitDrawSpotlight(g, ctx) {
  if (g.spot === null) return;
  const network = g.network, body = network.body;
  const near = new Set(g.spot), lit = new Set();
  for (const c of g.spot) {
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
  g.root.dataset.lit = String(near.size);
}

// After each DataSet change vis-network redoes its bookkeeping over every node and edge (edge
// state, clusters, visible indices, value ranges) and, physics being off, draws everything at once.
// A batch of changes pays for the bookkeeping once and is drawn on the next frame.
function memkitBatch(network, work) {
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
