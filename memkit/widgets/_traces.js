// TraceReplay: run list, run timeline, step detail, run comparison.
// Python computes every row (memkit.frames); this module draws them and reports clicks.

const RUN_COLUMNS = [
  { key: "status", label: "status", title: (r) => (r.live ? `${r.status}; gained a step a moment ago` : r.status),
    render: (r) => (r.live ? h("span", {}, statusBadge(r.status), h("span", { class: "mk-live-dot", text: "● live" })) : statusBadge(r.status)) },
  { key: "workflow_id", label: "workflow" },
  { key: "started", label: "started", sortKey: "started_at" },
  { key: "duration", label: "duration", sortKey: "duration_s",
    title: (r) => (r.duration_kind === "sum of steps" ? "Σ: the sum of its steps' durations (some steps recorded no start time)"
      : r.duration_kind === "unknown" ? "no step recorded a duration" : "wall clock: first start to last end") },
  { key: "steps", label: "steps" },
  { key: "failed_steps", label: "failed" },
  { key: "retries", label: "retries" },
  { key: "recalls", label: "recalls", render: (r) => (r.recalls === null || r.recalls === undefined ? "—" : String(r.recalls)),
    title: (r) => (r.recalls === null || r.recalls === undefined ? "this store keeps no recalls" : `${r.recalls} searches made by the run's steps`) },
  { key: "tokens", label: "tokens", sortKey: "tokens_total", title: (r) => r.tokens_title || null },
  { key: "cost", label: "cost", sortKey: "cost", title: (r) => (r.cost ? `${r.cost_value}` : "no cost recorded or priced") },
  { key: "models", label: "model" },
  { key: "first_error", label: "first error", title: (r) => r.first_error_full || null },
  { key: "agent_id", label: "agent" },
  { key: "user_id", label: "user" },
  { key: "run_id", label: "run id" },
];

const COMPARE_COLUMNS = [
  { key: "step_index", label: "step" },
  { key: "name_a", label: "A: step" },
  { key: "status_a", label: "A: status", render: (r) => (r.status_a ? statusBadge(r.status_a) : "—"), title: (r) => r.status_a },
  { key: "duration_a", label: "A: time" },
  { key: "name_b", label: "B: step" },
  { key: "status_b", label: "B: status", render: (r) => (r.status_b ? statusBadge(r.status_b) : "—"), title: (r) => r.status_b },
  { key: "duration_b", label: "B: time" },
  { key: "change", label: "change" },
  { key: "changes", label: "what differs" },
];

function tickStep(span) {
  const nice = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400];
  for (const s of nice) if (span / s <= 8) return s;
  return span / 8;
}

function fmtOffset(seconds) {
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 120) return `${+seconds.toFixed(1)} s`;
  if (seconds < 7200) return `${+(seconds / 60).toFixed(1)} min`;
  return `${+(seconds / 3600).toFixed(1)} h`;
}

// Which parents are folded, per run: survives a redraw of the same run (a step opened, marks saved).
const COLLAPSED = new WeakMap();
function collapsedOf(model, run) {
  let byRun = COLLAPSED.get(model);
  if (!byRun) { byRun = new Map(); COLLAPSED.set(model, byRun); }
  if (!byRun.has(run)) byRun.set(run, new Set());
  return byRun.get(run);
}

function drawTimeline(model, box) {
  box.replaceChildren();
  const tl = model.get("timeline") || {};
  if (!tl.run) { box.append(h("div", { class: "mk-empty", text: "pick a run in the list to see its timeline" })); return; }
  box.append(h("div", { class: "mk-title" },
    h("b", { text: `run ${tl.run}` }), " · ", statusBadge(tl.status), ` · ${tl.caption || ""}`,
    tl.usage ? h("span", { class: "mk-usage", text: ` · ${tl.usage}`, title: "LLM usage: each call counted once (a chain that reports its calls' tokens is not counted again)" }) : null));
  if (!tl.n) { box.append(h("div", { class: "mk-empty", text: "this run has no steps" })); return; }
  if (tl.timing_note) box.append(h("div", { class: "mk-timing-note", text: tl.timing_note }));
  const byOrder = tl.axis === "steps";
  const span = Math.max(tl.span_s || 0, 1e-3);
  // A nested run's labels are indented and carry roll-ups: a wider label column keeps deep names readable.
  const deepest = Array.isArray(tl.depth) ? tl.depth.reduce((a, b) => Math.max(a, b), 0) : 0;
  box.style.setProperty("--mk-tl-label", `${Math.min(190 + (deepest ? 60 + 14 * deepest : 0), 340)}px`);
  const step = byOrder ? Math.max(1, Math.ceil(span / 8)) : tickStep(span);
  const axis = h("div", { class: "mk-axis" });
  for (let t = 0; t <= span + 1e-9; t += step) {
    const text = byOrder ? (t < span ? `step ${t + 1}` : "") : (t === 0 ? "0" : fmtOffset(t));
    axis.append(h("span", { class: "mk-tick", style: { left: `${(100 * t) / span}%` }, text }));
  }
  // The track's width is known only once drawn (and changes with the page): when tick labels would
  // run together ("100 ms150 ms"), only every k-th is shown, the smallest k that keeps them apart.
  const thin = new ResizeObserver(() => {
    if (!axis.isConnected) { thin.disconnect(); return; }
    const ticks = [...axis.children];
    const boxes = ticks.map((t) => { t.style.visibility = ""; return t.getBoundingClientRect(); });
    const apart = (k) => boxes.every((b, i) => i < k || i % k || !b.width || boxes[i - k].right + 6 <= b.left);
    let k = 1;
    while (k < ticks.length && !apart(k)) k++;
    ticks.forEach((t, i) => { if (i % k) t.style.visibility = "hidden"; });
  });
  thin.observe(axis);
  box.append(h("div", { class: "mk-tl-row mk-tl-head" }, h("div", { class: "mk-tl-label", text: `step · tool (${tl.n})` }), axis));
  // Only the rows in view exist in the page (a 10,000-step run draws as fast as a 10-step one).
  const ROW = 20;
  const rows = h("div", { class: "mk-tl-rows", "data-steps": tl.n });
  const inner = h("div", { class: "mk-tl-inner" });
  rows.append(inner);
  // A nested run is a tree: a collapsed parent hides its descendants (kept per run while the panel lives).
  const tree = Array.isArray(tl.depth);
  const collapsed = collapsedOf(model, tl.run);
  // Failed steps under each parent (children of children included), so a folded parent still says so.
  const failedBelow = new Array(tl.n).fill(0);
  if (tree) {
    for (let i = tl.n - 1; i >= 0; i--) {  // parents come before their children
      const p = tl.parent[i];
      if (p >= 0 && p !== i) failedBelow[p] += failedBelow[i] + (tl.status_of[i] === "failed" ? 1 : 0);
    }
  }
  let shown = [];
  const layout = () => {
    shown = [];
    for (let i = 0; i < tl.n; i++) {
      let p = tree ? tl.parent[i] : -1;
      while (p >= 0 && !collapsed.has(p)) p = tl.parent[p];
      if (p < 0) shown.push(i);
    }
    inner.style.height = `${shown.length * ROW}px`;
  };
  layout();
  const tooltip = (i) => {
    const timed = !tl.timed || tl.timed[i];
    let text = `${tl.label[i]} · ${tl.status_of[i]} · ${timed && !byOrder ? fmtOffset(tl.duration_s[i]) : "no timing recorded"}`;
    if (tl.retries[i]) text += ` · ${tl.retries[i]} retries`;
    if ((tl.recalls || [])[i]) text += ` · ${tl.recalls[i]} recalls`;
    if ((tl.model || [])[i]) text += ` · ${tl.model[i]}`;
    if ((tl.tokens || [])[i]) text += ` · ${tl.tokens[i]} tokens`;
    if ((tl.cost || [])[i]) text += ` · ${tl.cost[i]}`;
    if (tl.error[i]) text += ` · "${tl.error[i]}"`;
    return text;
  };
  const drawRow = (i, slot) => {
    const status = tl.status_of[i], start = tl.start_s[i], dur = tl.duration_s[i], retries = tl.retries[i], gap = tl.gap_s[i];
    const left = (100 * start) / span;
    const width = Math.max((100 * dur) / span, 0.15);
    const track = h("div", { class: "mk-tl-track" }, h("div", {
      class: `mk-bar mk-bar-${status}${retries ? " mk-bar-retried" : ""}${tl.timed && !tl.timed[i] ? " mk-bar-untimed" : ""}`,
      "data-status": status, "data-position": i,
      style: { left: `${left}%`, width: `${Math.min(width, 100 - left)}%`, background: STATUS_COLOURS[status] || STATUS_COLOURS.unknown },
      title: tooltip(i),
    }));
    if (retries) track.append(h("span", { class: "mk-retry", style: { left: `${Math.min(left + width, 97)}%` }, text: `↻${retries}`, title: `${retries} retries` }));
    if (gap) track.append(h("span", { class: "mk-gap", style: { left: `${Math.max(left - (100 * gap) / span, 0)}%`, width: `${(100 * gap) / span}%` }, title: `idle ${fmtOffset(gap)} before this step` }));
    const recalls = (tl.recalls || [])[i];
    const label = h("div", { class: "mk-tl-label", title: tooltip(i) }, h("span", { class: "mk-tl-name", text: tl.label[i] }),
      recalls ? h("span", { class: "mk-recall-mark", text: String(recalls), title: `${recalls} recalls: searches this step made` }) : null);
    if (tree) {
      label.style.paddingLeft = `${tl.depth[i] * 14}px`;
      const open = !collapsed.has(i);
      label.prepend(tl.children[i]
        ? h("span", { class: "mk-caret", "data-position": i, "aria-expanded": open ? "true" : "false", text: open ? "▾" : "▸",
          title: `${open ? "hide" : "show"} its ${tl.children[i]} child steps` })
        : h("span", { class: "mk-caret mk-leaf" }));
      if (!open && failedBelow[i]) {
        label.append(h("span", { class: "mk-failed-below", text: `✕${failedBelow[i]}`,
          title: `${plural(failedBelow[i], "failed step", "failed steps")} folded away under this step` }));
      }
      if (tl.rolled[i]) {
        label.append(h("span", { class: "mk-rollup", text: `Σ ${tl.rolled[i]}`,
          title: `its ${tl.children[i]} child steps cover ${tl.rolled[i]} of wall-clock time (parallel children counted once)` }));
      }
    }
    return h("div", { class: `mk-tl-row${i === model.get("step") ? " mk-selected" : ""}`, "data-position": i,
      "data-depth": tree ? tl.depth[i] : null, style: { top: `${slot * ROW}px` } }, label, track);
  };
  let drawn = [-1, -1];
  const paint = () => {
    const first = Math.max(Math.floor(rows.scrollTop / ROW) - 10, 0);
    const last = Math.min(Math.ceil((rows.scrollTop + (rows.clientHeight || 420)) / ROW) + 10, shown.length);
    if (first === drawn[0] && last === drawn[1]) return;
    drawn = [first, last];
    const frag = document.createDocumentFragment();
    for (let slot = first; slot < last; slot++) frag.append(drawRow(shown[slot], slot));
    inner.replaceChildren(frag);
  };
  let pending = false;
  rows.addEventListener("scroll", () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; paint(); }); } });
  rows.paint = paint;
  paint();
  // One listener for all rows.
  rows.addEventListener("click", (event) => {
    const caret = event.target.closest(".mk-caret[data-position]");
    if (caret) {  // folds the tree; does not open the step
      const i = Number(caret.dataset.position);
      if (collapsed.has(i)) collapsed.delete(i); else collapsed.add(i);
      layout(); drawn = [-1, -1]; paint();
      return;
    }
    const row = event.target.closest(".mk-tl-row");
    if (row) send(model, "step", Number(row.dataset.position));
  });
  box.append(rows);
  requestAnimationFrame(() => rows.paint());  // now that the box has its height
  const legend = h("div", { class: "mk-legend" });
  for (const s of tl.statuses || []) legend.append(statusBadge(s), " ");
  legend.append(h("span", { class: "mk-retry-key", text: "↻n retries · dotted line = idle gap" }));
  if ((tl.rolled || []).some((r) => r)) legend.append(" ", h("span", { class: "mk-retry-key", text: "· Σ time its children cover" }));
  if ((tl.recalls || []).some((n) => n)) legend.append(" ", h("span", { class: "mk-recall-mark", text: "n" }), h("span", { class: "mk-retry-key", text: " searches the step made" }));
  box.append(legend);
}

// The message wraps; a traceback keeps its lines as Python wrote them (a caret line under its code,
// a long path on one line), scrolling sideways in a narrow detail instead of breaking mid-line.
const TRACEBACK = "Traceback (most recent call last):";

function errorBox(text) {
  const at = text.indexOf(TRACEBACK);
  if (at < 0) return h("pre", { class: "mk-error", text });
  return h("pre", { class: "mk-error" }, text.slice(0, at), h("span", { class: "mk-traceback", text: text.slice(at) }));
}

function drawDetail(model, box) {
  box.replaceChildren();
  const d = model.get("detail") || {};
  if (!d.title) { box.append(h("div", { class: "mk-empty", text: "click a bar to open its step" })); return; }
  box.append(h("div", { class: "mk-title" }, h("b", { text: d.title }), " ", statusBadge(d.status)));
  const facts = h("table", { class: "mk-facts" });
  for (const [key, value] of d.facts || []) facts.append(h("tr", {}, h("th", { text: key }), h("td", { text: value })));
  box.append(facts);
  if (d.keeps_marks) box.append(stepVerdict(model, d));
  if (d.error) box.append(h("div", { class: "mk-section", text: "error" }), errorBox(d.error));
  if ((d.retry_errors || []).length) {
    box.append(h("div", { class: "mk-section", text: "earlier attempts" }));
    const list = h("ol", { class: "mk-retries" });
    for (const e of d.retry_errors) list.append(h("li", { text: e }));
    box.append(list);
  }
  box.append(recallSection(model, d), wroteSection(model, d), memoryBox(model));
  for (const part of ["parameters", "result"]) {
    box.append(h("div", { class: "mk-section" }, part + " ", copyButton(() => JSON.stringify(d[part], null, 2))),
      h("div", { class: `mk-tree mk-${part}` }, jsonTree(d[part])));
  }
  // The agent's own keys (model, tokens, prompt, cost, traceback...): shown as written.
  if (d.data && Object.keys(d.data).length) {
    box.append(h("div", { class: "mk-section" }, "also recorded ", copyButton(() => JSON.stringify(d.data, null, 2))),
      h("div", { class: "mk-tree mk-data" }, jsonTree(d.data)));
  }
  if (d.attributes) box.append(attributeTable(d.attributes));
}

// Every key the step's data holds: a key/value table a search narrows (key or value), long values folded.
function attributeTable(rows) {
  const part = h("div", { class: "mk-attributes" });
  const count = h("span", { class: "mk-recall-meta" });
  const search = h("input", { class: "mk-attr-search", type: "search", placeholder: "search keys and values…",
    title: "show the attributes whose key or value contains this text" });
  const table = h("table", { class: "mk-facts mk-attr-table" });
  const draw = () => {
    const needle = search.value.trim().toLowerCase();
    const shown = needle ? rows.filter(([k, v]) => k.toLowerCase().includes(needle) || v.toLowerCase().includes(needle)) : rows;
    count.textContent = needle ? ` ${shown.length} of ${rows.length}` : ` ${rows.length}`;
    table.replaceChildren(...shown.map(([key, value, folded]) => {
      const cell = h("td", { class: "mk-attr-value" });
      if (!folded) cell.append(h("pre", { class: "mk-attr-text", text: value }));
      else {
        const pre = h("pre", { class: "mk-attr-text mk-attr-folded", text: value });
        const toggle = h("button", { class: "mk-attr-toggle", text: "more", title: "show the whole value" });
        toggle.addEventListener("click", () => {
          const open = pre.classList.toggle("mk-attr-folded");
          toggle.textContent = open ? "more" : "less";
        });
        cell.append(pre, toggle);
      }
      return h("tr", { "data-key": key }, h("th", { text: key }), cell);
    }));
  };
  search.addEventListener("input", draw);
  search.addEventListener("keydown", (e) => e.stopPropagation());
  part.append(h("div", { class: "mk-section" }, "attributes", count, " ", search), table);
  draw();
  return part;
}

// Scores of some searches are tiny (BM25 over a small namespace): keep their digits instead of "0.000".
const fmtScore = (s) => (s === null || s === undefined ? "—" : s === 0 || Math.abs(s) >= 0.001 ? s.toFixed(3) : s.toExponential(1));
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
const openMemory = (model, id) => model.send({ action: "open_memory", id });

// A researcher's verdict: two buttons and a note. A click saves at once with the note typed so far;
// editing the note of something already marked saves the note; a click on the pressed button clears the
// mark. Text goes in as text, never as markup.
function verdict({ current, note, choices, save, kind }) {
  const input = h("input", { class: "mk-mark-note", type: "text", maxlength: 2000, placeholder: "note (optional)",
    value: note || "", title: "a short note kept with the mark", onclick: (e) => e.stopPropagation() });
  input.addEventListener("change", () => { if (current) save(current, input.value); });
  input.addEventListener("keydown", (e) => { e.stopPropagation(); if (e.key === "Enter") input.blur(); });
  const box = h("span", { class: `mk-verdict mk-verdict-${kind}`, "data-label": current || "", onclick: (e) => e.stopPropagation() });
  for (const [label, text] of choices) {
    box.append(h("button", {
      class: `mk-mark-btn mk-mark-${label}${current === label ? " mk-on" : ""}`, text, "aria-pressed": current === label ? "true" : "false",
      title: current === label ? `marked ${text}; click again to clear` : `mark ${text}`,
      onclick: (e) => { e.stopPropagation(); save(current === label ? null : label, input.value); },
    }));
  }
  box.append(input);
  if (current) box.append(h("span", { class: "mk-mark-state", text: `marked ${current.replace("_", " ")}` }));
  return box;
}

function stepVerdict(model, d) {
  const mark = d.step_mark || {};
  return h("div", { class: "mk-step-verdict" }, h("span", { class: "mk-recall-meta", text: "this step: " }),
    verdict({ kind: "step", current: mark.label, note: mark.note, choices: [["good", "good"], ["bad", "bad"]],
      save: (label, note) => model.send({ action: "mark_step", good: label === null ? null : label === "good", note }) }));
}

// What the step recalled: each search (query, mode, when), then its hits best first.
function recallSection(model, d) {
  const part = h("div", { class: "mk-recalled" });
  if (!d.keeps_recalls) { part.append(h("div", { class: "mk-section", text: "recalled: not recorded by this store" })); return part; }
  const recalls = d.recalls || [];
  const searches = recalls.length > 1 ? ` in ${recalls.length} searches` : "";
  const docs = d.documents || 0, mems = (d.recalled || 0) - docs;
  const found = !docs ? `recalled ${plural(mems, "memory", "memories")}`
    : !mems ? `retrieved ${plural(docs, "document", "documents")}`
    : `recalled ${plural(mems, "memory", "memories")} and retrieved ${plural(docs, "document", "documents")}`;
  part.append(h("div", { class: "mk-section", text: `${found}${searches}` }));
  if (!recalls.length) { part.append(h("div", { class: "mk-empty", text: "no search recorded at this step" })); return part; }
  for (const r of recalls) {
    const head = h("div", { class: "mk-recall-head" },
      h("span", { class: "mk-recall-kind", text: r.kind === "context" ? "context for" : "search" }), " ",
      h("span", { class: "mk-query", text: r.query }),
      h("span", { class: "mk-recall-meta", text: ` · ${r.mode} · ${r.namespace} · ${r.when}${r.attempt > 1 ? ` · attempt ${r.attempt}` : ""}` }));
    part.append(head);
    if (!r.hits.length) { part.append(h("div", { class: "mk-empty", text: "returned nothing" })); continue; }
    const table = h("table", { class: "mk-hits", "data-recall": r.id });
    const what = r.hits.every((hit) => hit.external) ? "document (as retrieved)" : "memory (as recalled)";
    table.append(h("tr", {}, ...["rank", "score", "found by", what].map((t) => h("th", { text: t }))));
    for (const hit of r.hits) {
      const full = hit.full || hit.text;
      const text = h("td", { class: "mk-hit-text", title: hit.deleted ? `deleted from the store since; recalled as: ${full}`
        : hit.external ? `${full}\n(returned by the traced agent's own retriever; not a memory in this store; click to open)` : `${full}\n(click to open)` },
        h("div", { class: "mk-clamp" }, hit.deleted ? h("span", { class: "mk-deleted", text: "deleted" })
          : hit.external ? h("span", { class: "mk-external", text: "document" }) : null, hit.text));
      table.append(h("tr", {
        class: `mk-hit${hit.deleted ? " mk-hit-deleted" : ""}`, "data-id": hit.id, "data-rank": hit.rank,
        onclick: () => openMemory(model, hit.id),
      }, h("td", { class: "mk-hit-rank", text: hit.rank }),
        h("td", { class: "mk-hit-score", text: fmtScore(hit.score), title: hit.score === null ? null : String(hit.score) }),
        h("td", { class: "mk-hit-legs", text: hit.legs, title: `found by ${hit.legs}` }), text));
      if (!d.keeps_marks) continue;
      // The verdict: a row of its own under the memory, as wide as the table (the detail column is narrow).
      const marked = (d.hit_marks || {})[`${r.id} ${hit.id}`] || {};
      table.append(h("tr", { class: "mk-hit-verdict", "data-id": hit.id, "data-rank": hit.rank },
        h("td", {}), h("td", { colspan: 3 }, verdict({
          kind: "memory", current: marked.label, note: marked.note,
          choices: [["relevant", "relevant"], ["not_relevant", "not relevant"]],
          save: (label, note) => model.send({ action: "mark_memory", recall: r.id, memory: hit.id, relevant: label === null ? null : label === "relevant", note }),
        }))));
    }
    part.append(table);
  }
  return part;
}

// What the step wrote: found on request (a metadata scan), listed like the recalled ones.
function wroteSection(model, d) {
  const part = h("div", { class: "mk-wrote" });
  if (d.wrote === null || d.wrote === undefined) {
    part.append(h("div", { class: "mk-section" }, "wrote … memories ",
      h("button", { class: "mk-find-memories", text: "find", title: "memories whose metadata names this workflow and step",
        onclick: () => model.send({ action: "find_memories" }) })));
    return part;
  }
  part.append(h("div", { class: "mk-section", text: `wrote ${plural(d.wrote.length, "memory", "memories")}` }));
  if (!d.wrote.length) { part.append(h("div", { class: "mk-empty", text: "none recorded" })); return part; }
  const table = h("table", { class: "mk-hits mk-written" });
  for (const m of d.wrote) {
    table.append(h("tr", { class: "mk-hit", "data-id": m.id, onclick: () => openMemory(model, m.id) },
      h("td", { class: "mk-hit-text", title: `${m.text}\n(click to open)` }, h("div", { class: "mk-clamp", text: m.text }))));
  }
  part.append(table);
  return part;
}

// The memory opened from either list (or, deleted since, the text the step recalled).
function memoryBox(model) {
  const m = model.get("memory") || {};
  const box = h("div", { class: `mk-memory${m.deleted ? " mk-memory-deleted" : ""}` });
  if (!m.id) return box;
  box.append(h("div", { class: "mk-title" }, h("b", { text: m.title }), " ",
    h("button", { class: "mk-close", text: "×", title: "close", onclick: () => send(model, "memory", {}) })));
  if (m.note) box.append(h("div", { class: "mk-note", text: m.note }));
  box.append(h("pre", { class: "mk-memory-text", text: m.text }));
  const facts = h("table", { class: "mk-facts" });
  for (const [key, value] of m.facts || []) facts.append(h("tr", {}, h("th", { text: key }), h("td", { text: value })));
  box.append(facts);
  return box;
}

function drawCompare(model, box) {
  box.replaceChildren();
  const c = model.get("comparison") || {};
  const runs = model.get("runs") || [];
  const current = model.get("run");
  const picker = h("select", { class: "mk-compare-pick" }, h("option", { value: "", text: "compare with…" }));
  const options = model.get("compare_options") || [];
  const chosen = model.get("compare_with");
  const option = (r) => h("option", { value: r.run, text: `${r.run} (${r.status})${r.hidden ? " · hidden by the filters" : ""}`,
    selected: r.run === chosen ? "" : null });
  const same = options.filter((r) => !r.other_workflow), other = options.filter((r) => r.other_workflow);
  if (same.length) picker.append(h("optgroup", { label: "same workflow" }, ...same.map(option)));
  if (other.length) picker.append(h("optgroup", { label: "other workflows (steps need not correspond)" }, ...other.map(option)));
  if (!options.length) for (const r of runs) if (r.run !== current) picker.append(option(r));
  picker.addEventListener("change", () => send(model, "compare_with", picker.value));
  box.append(h("div", { class: "mk-title" }, h("b", { text: "compare runs " }), picker));
  if (!c.rows) return;
  if (c.workflow_note) box.append(h("div", { class: "mk-timing-note mk-workflow-note", text: c.workflow_note }));
  box.append(h("div", { class: "mk-caption", text: c.caption || "" }));
  box.append(dataGrid({
    columns: COMPARE_COLUMNS, rows: c.rows,
    rowClass: (r) => (r.change === "same" ? "" : r.change === "data differs" ? "mk-data-changed" : "mk-changed"),
  }));
}

function drawRuns(model, box) {
  box.replaceChildren();
  const live = new Set(model.get("live_runs") || []);  // runs that gained a step a moment ago
  const rows = (model.get("runs") || []).map((r) => (live.has(r.run) ? { ...r, live: true } : r));
  const hidden = model.get("hidden_columns") || [];
  box.append(h("div", { class: "mk-caption" },
    `${rows.length.toLocaleString()} of ${(model.get("total_runs") || 0).toLocaleString()} runs`,
    model.get("runs_capped") ? " (first rows shown; narrow the filters)" : "",
    model.get("following") ? h("span", { class: "mk-following", title: "new runs and steps appear as they are written", text: " · ● following the store" }) : "", " ",
    columnPicker(RUN_COLUMNS, hidden, (now) => send(model, "hidden_columns", now))));
  if (!rows.length) { box.append(h("div", { class: "mk-empty", text: model.get("total_runs") ? "no run matches these filters" : "no traces in this store" })); return; }
  box.append(dataGrid({
    columns: RUN_COLUMNS, rows, hidden, sort: model.get("sort"),
    keyOf: (r) => r.run, selectedKey: model.get("run"),
    rowClass: (r) => `mk-run-${r.status}${r.live ? " mk-live" : ""}`,
    onSort: (column) => {
      const s = model.get("sort") || {};
      send(model, "sort", { column, descending: s.column === column ? !s.descending : true });
    },
    onRowClick: (r) => send(model, "run", r.run),
  }));
}

function filterBar(model) {
  const opts = model.get("options") || {};
  const f = { ...(model.get("filters") || {}) };
  const apply = () => send(model, "filters", { ...f });
  const select = (key, label, values) => {
    const s = h("select", { class: `mk-filter-${key}`, title: label }, h("option", { value: "", text: `any ${label}` }));
    for (const v of values || []) s.append(h("option", { value: v, text: v, selected: f[key] === v ? "" : null }));
    s.addEventListener("change", () => { f[key] = s.value || null; apply(); });
    return s;
  };
  const input = (key, label, type, width) => {
    const i = h("input", { class: `mk-filter-${key}`, type, placeholder: label, title: label, value: f[key] ?? "", style: { width } });
    const commit = () => { f[key] = i.value === "" ? null : (type === "number" ? Number(i.value) : i.value); apply(); };
    i.addEventListener("change", commit);
    i.addEventListener("keydown", (e) => { if (e.key === "Enter") commit(); });
    return i;
  };
  return h("div", { class: "mk-filters" },
    input("text", "find run, error, tool…", "search", "170px"),
    input("payload", "search inside steps' inputs and outputs…", "search", "200px"),
    select("status", "status", opts.statuses), select("user_id", "user", opts.users),
    select("agent_id", "agent", opts.agents),
    select("tool", "tool", opts.tools), select("model", "model", opts.models),
    select("session", "session", opts.sessions), select("tag", "tag", opts.tags),
    h("label", { text: "from " }), input("since", "from", "date", "130px"),
    h("label", { text: "to " }), input("until", "to", "date", "130px"),
    input("min_duration", "min s", "number", "70px"), input("max_duration", "max s", "number", "70px"),
    input("min_tokens", "min tokens", "number", "90px"), input("max_tokens", "max tokens", "number", "90px"),
    input("min_cost", "min $", "number", "70px"), input("max_cost", "max $", "number", "70px"),
    h("button", { text: "clear", onclick: () => send(model, "filters", {}) }));
}

function render({ model, el }) {
  el.classList.add("memkit-panel", "memkit-traces");
  const filters = h("div");
  const runs = h("div", { class: "mk-runs" });
  const timeline = h("div", { class: "mk-timeline" });
  const detail = h("div", { class: "mk-detail" });
  const compare = h("div", { class: "mk-compare" });
  el.append(busyLine(model), filters, runs, h("div", { class: "mk-split" }, timeline, detail), compare);
  const redrawFilters = () => filters.replaceChildren(filterBar(model));
  redrawFilters();
  drawRuns(model, runs); drawTimeline(model, timeline); drawDetail(model, detail); drawCompare(model, compare);
  model.on("change:options", redrawFilters);
  model.on("change:filters", redrawFilters);
  for (const name of ["runs", "sort", "hidden_columns", "total_runs", "following", "live_runs"]) model.on(`change:${name}`, () => { drawRuns(model, runs); drawCompare(model, compare); });
  model.on("change:run", () => drawRuns(model, runs));
  model.on("change:timeline", () => drawTimeline(model, timeline));
  model.on("change:step", () => {
    const now = model.get("step");
    timeline.querySelectorAll(".mk-tl-inner > .mk-selected").forEach((r) => r.classList.remove("mk-selected"));
    const row = timeline.querySelector(`.mk-tl-inner > .mk-tl-row[data-position="${now}"]`);
    if (row) row.classList.add("mk-selected");
  });
  model.on("change:detail", () => drawDetail(model, detail));
  model.on("change:memory", () => {
    const old = detail.querySelector(".mk-memory");
    if (old) old.replaceWith(memoryBox(model));
  });
  model.on("change:comparison", () => drawCompare(model, compare));
  model.on("change:compare_options", () => drawCompare(model, compare));
  askForState(model);
}

export default { render };
