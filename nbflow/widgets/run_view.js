// The run view's front end (anywidget ES module, no build step).
// The kernel sends small state (node states, header, the selected node's details); the graph SVG arrives
// once and is recoloured here. Every user action goes to the kernel as a custom message (model.send),
// which ipywidgets' per-model state-update throttle does not hold back (see run_view.py).

const STATES = ["pending", "running", "paused", "succeeded", "failed", "skipped", "cancelled", "none"];

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children) el.append(c);
  return el;
}

function hideSnapshot(id) {
  // The static snapshot shown beside the widget (for saved notebooks) is hidden while the live view renders.
  if (!id || document.getElementById("nbflow-hide-" + id)) return;
  const style = h("style", { id: "nbflow-hide-" + id });
  style.textContent = `.nbflow-snap-${id} { display: none !important; }`;
  document.head.append(style);
}

// Node states arrive as numbered per-node deltas (custom messages), folded into the model's "nodes" here,
// once per model (every view of it listens to change:nodes). A gap in the numbers (deltas sent before this
// model listened) asks the kernel for the whole state once.
function initialize({ model }) {
  let folded = 0; // the last delta folded in here; the model's own state may be newer (a state sync)
  const seq = () => Math.max(folded, model.get("nodes_seq") || 0);
  const onMsg = (msg) => {
    if (!msg || msg.kind !== "nodes") return;
    if (msg.full) {
      if (msg.seq < seq()) return;
      folded = msg.seq;
      model.set("nodes", msg.full);
      return;
    }
    if (msg.seq <= seq()) return; // already in (a resync answered after it was sent)
    const gap = msg.seq !== seq() + 1;
    folded = msg.seq;
    model.set("nodes", { ...(model.get("nodes") || {}), ...msg.delta }); // the newest news either way
    if (gap) model.send({ kind: "resync", seq: -1 });
  };
  model.on("msg:custom", onMsg);
  model.send({ kind: "resync", seq: seq() }); // deltas may have gone out before this model listened
  return () => model.off("msg:custom", onMsg);
}

function render({ model, el }) {
  const send = (msg) => model.send(msg);
  el.classList.add("nbflow-rv");
  hideSnapshot(model.get("snapshot_id"));

  const header = h("div", { class: "nbflow-rv-header" });
  const problems = h("div", { class: "nbflow-rv-problems" });
  const questions = h("div", { class: "nbflow-rv-questions" });
  const search = h("input", { type: "search", class: "nbflow-rv-search", placeholder: "find a node…", "aria-label": "find a node" });
  const selector = h("select", { class: "nbflow-rv-select", "aria-label": "node" });
  const zoomIn = h("button", { class: "nbflow-rv-btn", title: "zoom in" }, "+");
  const zoomOut = h("button", { class: "nbflow-rv-btn", title: "zoom out" }, "−");
  const fit = h("button", { class: "nbflow-rv-btn", title: "fit the whole graph in view" }, "fit");
  const cancel = h("button", { class: "nbflow-rv-btn nbflow-rv-cancel", title: "Cancel the run (finished outputs are kept)" }, "■ Cancel");
  const fold = h("button", { class: "nbflow-rv-btn nbflow-rv-fold", title: "open or fold the sub-flow (or double-click it)" });
  const tools = h("div", { class: "nbflow-rv-tools" }, search, selector, zoomIn, zoomOut, fit, fold, cancel);
  const svgHost = h("div", { class: "nbflow-rv-svg" });
  const pane = h("div", { class: "nbflow-rv-graph nbflow-graph", tabindex: "0", "aria-label": "graph: arrow keys move between nodes" }, svgHost);
  const legend = h("div", { class: "nbflow-rv-legend", style: "display:none" },
    h("span", { class: "nbflow-rv-taken" }, "━━ branch taken"), "  ", h("span", { class: "nbflow-rv-not-taken" }, "╌╌ branch not taken (skipped)"));
  const left = h("div", { class: "nbflow-rv-left" }, tools, pane, legend);
  const tabInspector = h("button", { class: "nbflow-rv-tab nbflow-rv-tab-on" }, "Inspector");
  const tabTimeline = h("button", { class: "nbflow-rv-tab" }, "Timeline");
  const inspector = h("div", { class: "nbflow-rv-inspector" });
  const timeline = h("div", { class: "nbflow-rv-timeline", style: "display:none" });
  const right = h("div", { class: "nbflow-rv-right" }, h("div", { class: "nbflow-rv-tabs" }, tabInspector, tabTimeline), inspector, timeline);
  const body = h("div", { class: "nbflow-rv-body" }, left, right);
  const refused = h("div", { class: "nbflow-rv-refused", role: "alert" });
  const drawRefused = () => {
    const text = model.get("message_error") || "";
    refused.textContent = text;
    refused.style.display = text ? "" : "none";
  };
  el.replaceChildren(header, refused, problems, questions, body);

  let zoom = 0; // 0: fit the whole graph (width and height) in the visible area; else a scale of the natural size
  let drawnSvg = null;
  let nodesById = new Map();

  // --- graph ---------------------------------------------------------------------------------
  function applyZoom() {
    const svg = svgHost.querySelector("svg");
    if (!svg) return;
    const w = parseFloat(svg.getAttribute("data-w") || "0");
    const ht = parseFloat(svg.getAttribute("data-h") || "0");
    if (zoom === 0) {
      // the largest size (never above natural) at which the whole picture shows: the pane's width, and the
      // height of the visible area (the notebook's scrolling panel, else the window) below the pane's top
      // (at most the pane's own 640 px, at least 240 px)
      const area = visibleArea();
      const top = Math.min(Math.max(area.top, pane.getBoundingClientRect().top), area.top + 200);
      const room = Math.min(640, Math.max(240, area.bottom - top - 12)) - 4;
      const across = pane.clientWidth - 4;
      const scale = w && ht && across > 0 ? Math.min(1, across / w, room / ht) : 1;
      svg.style.width = w ? w * scale + "px" : "100%";
      svg.style.maxWidth = "100%";
      svg.style.height = "auto";
    } else {
      svg.style.width = w * zoom + "px";
      svg.style.maxWidth = "none";
      svg.style.height = "auto";
    }
  }

  // the part of the page the pane scrolls in: its nearest scrolling ancestor (JupyterLab's notebook panel)
  function visibleArea() {
    for (let e = pane.parentElement; e && e !== document.body; e = e.parentElement) {
      const y = getComputedStyle(e).overflowY;
      if ((y === "auto" || y === "scroll") && e.scrollHeight > e.clientHeight) {
        const r = e.getBoundingClientRect();
        return { top: Math.max(0, r.top), bottom: Math.min(window.innerHeight || r.bottom, r.bottom) };
      }
    }
    return { top: 0, bottom: window.innerHeight || 720 };
  }

  function drawSvg() {
    const text = model.get("svg");
    const table = model.get("table");
    if (text) {
      if (text !== drawnSvg) {
        svgHost.innerHTML = text;
        drawnSvg = text;
        const svg = svgHost.querySelector("svg");
        if (svg) {
          svg.setAttribute("data-w", String((parseFloat(svg.getAttribute("width") || "0") * 4) / 3)); // pt -> px
          svg.setAttribute("data-h", String((parseFloat(svg.getAttribute("height") || "0") * 4) / 3));
          svg.removeAttribute("height");
        }
        nodesById = new Map();
        for (const g of svgHost.querySelectorAll("g.nbflow-node")) nodesById.set(g.id.slice(5), g);
        applyZoom();
      }
      recolour();
    } else {
      svgHost.innerHTML = table || '<div class="nbflow-muted">starting…</div>';
      nodesById = new Map();
      for (const tr of svgHost.querySelectorAll(".nbflow-node")) nodesById.set(tr.id.slice(5), tr);
    }
    markSelected();
  }

  // a router's edge to a branch: taken once its node ran, not taken (dashed, grey) once it was skipped
  const RAN = new Set(["running", "paused", "succeeded", "failed", "cancelled"]);
  function markBranches(nodes) {
    for (const g of svgHost.querySelectorAll("g.nbflow-branch")) {
      const v = nodes[g.id.slice(8)];
      const state = v ? v[0] : "pending";
      g.classList.toggle("nbflow-taken", RAN.has(state));
      g.classList.toggle("nbflow-not-taken", state === "skipped");
    }
    legend.style.display = svgHost.querySelector("g.nbflow-branch") ? "" : "none";
  }

  function recolour() {
    const nodes = model.get("nodes") || {};
    markBranches(nodes);
    for (const [name, g] of nodesById) {
      const v = nodes[name];
      const state = v ? v[0] : "pending";
      const cls = g.getAttribute("class") || "";
      const next = cls.split(/\s+/).filter((c) => !c.startsWith("nbflow-") || c === "nbflow-node" || c === "nbflow-selected" || c === "nbflow-match" || c === "nbflow-dim");
      next.push("nbflow-" + state);
      g.setAttribute("class", next.join(" "));
      if (v) {
        const texts = g.querySelectorAll("text");
        const last = texts[texts.length - 1];
        if (last && texts.length > 1 && last.textContent !== v[1]) last.textContent = v[1];
        const a = g.querySelector("a");
        if (a) {
          a.setAttributeNS("http://www.w3.org/1999/xlink", "xlink:title", v[2]);
          a.setAttribute("title", v[2]);
        }
      }
    }
  }

  function markSelected() {
    const sel = model.get("selected");
    for (const [name, g] of nodesById) {
      const cls = (g.getAttribute("class") || "").split(/\s+/).filter((c) => c && c !== "nbflow-selected");
      if (name === sel) cls.push("nbflow-selected");
      g.setAttribute("class", cls.join(" "));
    }
    if (selector.value !== sel) selector.value = sel;
  }

  function scrollToNode(name) {
    const g = nodesById.get(name);
    if (!g) return;
    const box = g.getBoundingClientRect();
    const view = pane.getBoundingClientRect();
    if (box.top < view.top || box.bottom > view.bottom) pane.scrollTop += box.top - view.top - view.height / 2 + box.height / 2;
    if (box.left < view.left || box.right > view.right) pane.scrollLeft += box.left - view.left - view.width / 2 + box.width / 2;
  }

  function pick(name, how) {
    if (!name) return;
    model.set("selected", name); // local echo only: never saved, the kernel's answer follows
    markSelected();
    drawFold();
    send({ kind: "select", node: name, how });
  }

  // one delegated click handler; dragging pans, ctrl+wheel zooms
  let drag = null;
  pane.addEventListener("mousedown", (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, left: pane.scrollLeft, top: pane.scrollTop, moved: false };
  });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 4) drag.moved = true;
    if (drag.moved) {
      pane.scrollLeft = drag.left - dx;
      pane.scrollTop = drag.top - dy;
    }
  });
  window.addEventListener("mouseup", () => {
    setTimeout(() => (drag = null), 0);
  });
  pane.addEventListener("click", (e) => {
    if (drag && drag.moved) return;
    const n = e.target.closest(".nbflow-node");
    if (n && n.id) pick(n.id.slice(5), "click");
  });
  pane.addEventListener("wheel", (e) => {
    if (!e.ctrlKey) return;
    e.preventDefault();
    setZoom(e.deltaY < 0 ? 1.2 : 1 / 1.2);
  }, { passive: false });
  pane.addEventListener("keydown", (e) => {
    const names = optionNames();
    const i = names.indexOf(model.get("selected"));
    if (e.key === "ArrowDown" || e.key === "ArrowRight") pick(names[Math.min(i + 1, names.length - 1)], "key");
    else if (e.key === "ArrowUp" || e.key === "ArrowLeft") pick(names[Math.max(i - 1, 0)], "key");
    else if (e.key === "+" || e.key === "=") setZoom(1.2);
    else if (e.key === "-") setZoom(1 / 1.2);
    else return;
    e.preventDefault();
  });

  function setZoom(factor) {
    const svg = svgHost.querySelector("svg");
    if (!svg) return;
    const w = parseFloat(svg.getAttribute("data-w") || "0") || 1;
    const current = zoom === 0 ? svg.getBoundingClientRect().width / w : zoom;
    zoom = Math.min(8, Math.max(0.1, current * factor));
    applyZoom();
  }
  zoomIn.addEventListener("click", () => setZoom(1.25));
  zoomOut.addEventListener("click", () => setZoom(0.8));
  fit.addEventListener("click", () => {
    zoom = 0;
    applyZoom();
    pane.scrollTop = 0;
    pane.scrollLeft = 0;
  });
  // fitted, the picture follows the pane's width (a resized window, a narrower column)
  const resized = new ResizeObserver(() => { if (zoom === 0) applyZoom(); });
  resized.observe(pane);
  cancel.addEventListener("click", () => {
    cancel.disabled = true;
    cancel.textContent = "Cancelling…";
    send({ kind: "cancel" });
  });

  // --- sub-flows: folded into one node, or open --------------------------------------------------
  function foldTarget() {
    // the selected sub-flow, or the innermost sub-flow around the selected node
    const sel = model.get("selected") || "";
    const subs = model.get("subflows") || [];
    if (subs.includes(sel)) return sel;
    return subs.filter((p) => sel.startsWith(p + ".")).sort((a, b) => b.length - a.length)[0] || null;
  }
  function drawFold() {
    const target = foldTarget();
    fold.style.display = target ? "" : "none";
    if (!target) return;
    const folded = (model.get("collapsed") || []).includes(target);
    fold.textContent = folded ? `▸ open ${target}` : `▾ fold ${target}`;
  }
  function toggleFold(target) {
    if (!target) return;
    const folded = (model.get("collapsed") || []).includes(target);
    send({ kind: "fold", node: target, folded: !folded });
  }
  fold.addEventListener("click", () => toggleFold(foldTarget()));
  pane.addEventListener("dblclick", (e) => {
    const n = e.target.closest(".nbflow-node");
    if (n && n.id && (model.get("subflows") || []).includes(n.id.slice(5))) toggleFold(n.id.slice(5));
  });

  // --- search ----------------------------------------------------------------------------------
  search.addEventListener("input", () => {
    const q = search.value.trim().toLowerCase();
    for (const [name, g] of nodesById) {
      const cls = (g.getAttribute("class") || "").split(/\s+/).filter((c) => c && c !== "nbflow-match" && c !== "nbflow-dim");
      if (q) cls.push(name.toLowerCase().includes(q) ? "nbflow-match" : "nbflow-dim");
      g.setAttribute("class", cls.join(" "));
    }
  });
  search.addEventListener("keydown", (e) => {
    if (e.key !== "Enter") return;
    const q = search.value.trim().toLowerCase();
    const found = optionNames().find((n) => n.toLowerCase().includes(q));
    if (found) {
      pick(found, "search");
      scrollToNode(found);
    }
  });

  // --- selector --------------------------------------------------------------------------------
  // With a picture the kernel sends the names once and the labels come from the node states
  // ("✗ report — failed"); without one (a table) its labels are the names.
  function optionLabel(name) {
    const symbols = model.get("symbols") || {};
    const v = (model.get("nodes") || {})[name];
    if (!v || !Object.keys(symbols).length) return name;
    const state = v[0] === "none" ? "not in run" : v[0];
    return `${symbols[state] || "·"} ${name} — ${state}`;
  }
  // Every node's path, one a line (the kernel sends them once, as one string; a list from an older kernel).
  let optionsText = null;
  let optionsList = [];
  function optionNames() {
    const o = model.get("options");
    if (typeof o !== "string") return o || [];
    if (o !== optionsText) {
      optionsText = o;
      optionsList = o ? o.split("\n") : [];
    }
    return optionsList;
  }
  function drawOptions() {
    const names = optionNames();
    selector.replaceChildren(...names.map((name) => h("option", { value: name }, optionLabel(name))));
    selector.value = model.get("selected");
  }
  function relabelOptions() {
    for (const o of selector.options) {
      const text = optionLabel(o.value);
      if (o.textContent !== text) o.textContent = text;
    }
  }
  selector.addEventListener("change", () => pick(selector.value, "selector"));

  // --- header, problems, inspector --------------------------------------------------------------
  function drawText() {
    header.innerHTML = model.get("header");
    problems.innerHTML = model.get("problems");
    inspector.innerHTML = model.get("inspector");
    const live = model.get("cancellable");
    cancel.style.display = live ? "" : "none";
    if (!model.get("cancelling")) {
      cancel.disabled = false;
      cancel.textContent = "■ Cancel";
    }
  }
  problems.addEventListener("click", (e) => {
    const p = e.target.closest("[data-node]");
    if (p) {
      pick(p.getAttribute("data-node"), "problem");
      scrollToNode(p.getAttribute("data-node"));
    }
  });

  // --- questions of a paused run ----------------------------------------------------------------
  function drawQuestions() {
    const qs = model.get("questions") || [];
    const status = model.get("answer_status") || {};
    questions.replaceChildren(
      ...qs.map((q) => {
        const comment = h("textarea", { class: "nbflow-rv-comment", rows: "2", placeholder: "comment (optional, kept with the answer)" });
        const controls = h("div", { class: "nbflow-rv-answers" });
        const answer = (value, how) => {
          for (const b of controls.querySelectorAll("button,input")) b.disabled = true;
          send({ kind: "answer", key: q.key, value, comment: comment.value, how });
        };
        if (q.options.length) {
          q.options.forEach((o, i) => {
            controls.append(h("button", { class: "nbflow-rv-btn" + (i === 0 ? " nbflow-rv-primary" : ""), title: `answer ${o}`, onclick: () => answer(o, "the button") }, o));
          });
        } else {
          const box = h("input", { type: "text", class: "nbflow-rv-answer", placeholder: "your answer" });
          box.addEventListener("keydown", (e) => e.key === "Enter" && answer(box.value, "typing"));
          controls.append(box, h("button", { class: "nbflow-rv-btn nbflow-rv-primary", onclick: () => answer(box.value, "typing") }, "Answer"));
        }
        const note = h("div", { class: "nbflow-rv-qstatus" });
        note.textContent = status[q.key] || "";
        const data = h("div", { class: "nbflow-rv-qdata" });
        data.innerHTML = q.data;
        const title = h("div", { class: "nbflow-rv-qtitle" });
        title.append(h("span", { class: "nbflow-rv-qnode" }, `‖ ${q.node} asks`), " ", h("b", {}, q.prompt), h("span", { class: "nbflow-muted" }, ` · asked at ${q.asked}`));
        return h("div", { class: "nbflow-rv-question", "data-key": q.key }, title, data, controls, comment, note);
      }),
    );
  }
  function drawAnswerStatus() {
    const status = model.get("answer_status") || {};
    for (const card of questions.querySelectorAll(".nbflow-rv-question")) {
      const key = card.getAttribute("data-key");
      const note = card.querySelector(".nbflow-rv-qstatus");
      note.textContent = status[key] || "";
      if (!status[key] || !/resuming/.test(status[key])) for (const b of card.querySelectorAll("button,input")) b.disabled = false;
    }
  }

  // --- timeline --------------------------------------------------------------------------------
  function drawTimeline() {
    const tl = model.get("timeline") || {};
    const rows = tl.rows || [];
    const end = Math.max(tl.end || 0, 1e-3);
    timeline.replaceChildren(
      h("div", { class: "nbflow-muted" }, `0 … ${end < 1 ? (end * 1000).toFixed(0) + " ms" : end.toFixed(2) + " s"}`),
      ...rows.map((r) => {
        const lane = h("div", { class: "nbflow-rv-lane" });
        for (const [s, e, kind] of r.bars) {
          const bar = h("div", { class: `nbflow-rv-bar nbflow-rv-bar-${kind}`, title: `${r.node}: ${kind} ${s.toFixed(3)}–${e.toFixed(3)} s` });
          bar.style.left = (100 * s) / end + "%";
          bar.style.width = Math.max(0.5, (100 * (e - s)) / end) + "%";
          lane.append(bar);
        }
        return h("div", { class: "nbflow-rv-tlrow", "data-node": r.node, onclick: () => pick(r.node, "timeline") }, h("span", { class: `nbflow-rv-tlname nbflow-chip-${r.state}` }, r.node), lane);
      }),
    );
  }
  function showTab(which) {
    const tl = which === "timeline";
    inspector.style.display = tl ? "none" : "";
    timeline.style.display = tl ? "" : "none";
    tabInspector.classList.toggle("nbflow-rv-tab-on", !tl);
    tabTimeline.classList.toggle("nbflow-rv-tab-on", tl);
    if (tl) send({ kind: "timeline" });
  }
  tabInspector.addEventListener("click", () => showTab("inspector"));
  tabTimeline.addEventListener("click", () => showTab("timeline"));

  // --- wiring ----------------------------------------------------------------------------------
  let lastSelected = null;
  const onSelected = () => {
    markSelected();
    const sel = model.get("selected");
    if (sel !== lastSelected) {
      lastSelected = sel;
      requestAnimationFrame(() => scrollToNode(sel));
    }
  };
  const handlers = [
    ["change:svg", drawSvg],
    ["change:table", drawSvg],
    ["change:nodes", recolour],
    ["change:nodes", relabelOptions],
    ["change:selected", onSelected],
    ["change:options", drawOptions],
    ["change:header", drawText],
    ["change:problems", drawText],
    ["change:inspector", drawText],
    ["change:cancellable", drawText],
    ["change:cancelling", drawText],
    ["change:questions", drawQuestions],
    ["change:answer_status", drawAnswerStatus],
    ["change:message_error", drawRefused],
    ["change:timeline", drawTimeline],
    ["change:selected", drawFold],
    ["change:collapsed", drawFold],
    ["change:subflows", drawFold],
  ];
  for (const [ev, fn] of handlers) model.on(ev, fn);
  drawSvg();
  drawOptions();
  drawText();
  drawQuestions();
  drawFold();
  drawRefused();
  onSelected();
  if (!model.get("selected")) lastSelected = null;
  return () => {
    for (const [ev, fn] of handlers) model.off(ev, fn);
    resized.disconnect();
  };
}

export default { initialize, render };
