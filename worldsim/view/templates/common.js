/* worldsim viewer: shared helpers. Every string from the data reaches the page through
   textContent (h() and svg() below): nothing from a trace is ever parsed as markup. */
"use strict";

var DATA = JSON.parse(document.getElementById("data").textContent);
var DATA_BYTES = document.getElementById("data").textContent.length;
var SVGNS = "http://www.w3.org/2000/svg";
var PALETTE = ["#3f6fb5", "#d9822b", "#16794a", "#b42318", "#7a5af8", "#0e9384", "#c11574",
  "#667085", "#a15c00", "#1570ef"];

/* An element with attributes and children (strings become text nodes). */
function h(tag, attrs) {
  var el = document.createElement(tag);
  setAttrs(el, attrs);
  for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
  return el;
}

function svg(tag, attrs) {
  var el = document.createElementNS(SVGNS, tag);
  setAttrs(el, attrs);
  for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
  return el;
}

function setAttrs(el, attrs) {
  if (!attrs) return;
  Object.keys(attrs).forEach(function (k) {
    var v = attrs[k];
    if (v === null || v === undefined || v === false) return;
    if (k === "onclick" || k === "oninput" || k === "onchange") el[k] = v;
    else if (/^on|^href$|^src$/i.test(k)) throw new Error("refused attribute " + k);
    else el.setAttribute(k, String(v));
  });
}

function append(el, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) { child.forEach(function (c) { append(el, c); }); return; }
  el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
}

function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }

function fmt(x, digits) {
  if (x === null || x === undefined) return "–";
  if (typeof x !== "number") return String(x);
  return x.toFixed(digits === undefined ? 3 : digits);
}

function lineage(id) { return id.slice(1).split(".").map(Number); }

function byLineage(a, b) {
  var x = lineage(a), y = lineage(b);
  for (var i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

/* The page's state lives in the URL fragment (#view=ticks&tick=3&tl=t0.1), so a view can be
   linked to, reloaded, and opened at a given place by a test. */
function getState() {
  var out = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (pair) {
    if (!pair) return;
    var i = pair.indexOf("=");
    var k = decodeURIComponent(i < 0 ? pair : pair.slice(0, i));
    out[k] = i < 0 ? "" : decodeURIComponent(pair.slice(i + 1));
  });
  return out;
}

function stateHash(state) {
  return "#" + Object.keys(state).filter(function (k) {
    return state[k] !== "" && state[k] !== null && state[k] !== undefined;
  }).map(function (k) {
    return encodeURIComponent(k) + "=" + encodeURIComponent(state[k]);
  }).join("&");
}

/* Change the state: navigate (re-render through hashchange), or quietly record it. */
function setState(patch, quiet) {
  var state = getState();
  Object.keys(patch).forEach(function (k) { state[k] = patch[k]; });
  if (quiet) history.replaceState(null, "", stateHash(state));
  else location.hash = stateHash(state);
}

/* The verification header: green when sound and complete, amber when cut off. A trace that
   does not verify never reaches a page (the command refuses it). */
function verificationBanner(v, label) {
  var status = v.complete ? "ok" : "warn";
  var sig = v.signature ? ("signed" + (v.signature.key_id ? " (key " + v.signature.key_id + ")" : "") +
    (v.signature.checked ? ", signature ✓" : ", not checked (--public-key)")) : "unsigned";
  return h("div", { "class": "banner" + (v.complete ? "" : " warn"), "data-status": status },
    label ? h("strong", null, label + " ") : null,
    h("span", { "class": "ok" }, "chain ✓ (" + v.records + " records)"),
    h("span", { "class": v.seal === "ok" ? "ok" : "warn" }, "seal " + (v.seal === "ok" ? "✓" : "absent")),
    h("span", { "class": status }, v.complete ? "complete" :
      "INCOMPLETE: " + (v.torn_line ? "torn line " + v.torn_line + " ignored; " : "") +
      "ends with " + (v.terminal || "no terminal record")),
    h("span", { "class": "mono", title: "SHA-256 of the last record: the trace's head" }, "head " + v.head.slice(0, 16) + "…"),
    h("span", v.anchor ? { "class": "ok" } : null,
      v.anchor ? "anchor ✓ (" + v.anchor + ")" : "anchor not checked (--expect-head)"),
    h("span", v.signature && v.signature.checked ? { "class": "ok" } : null, sig),
    v.extraction_matches === null ? null :
      h("span", { "class": v.extraction_matches ? "ok" : "bad" }, "replayed extraction " + (v.extraction_matches ? "matches" : "differs")));
}

/* A tree of timelines: one horizontal line per timeline from its fork tick to its last tick,
   its width by path mass, its colour by settlement; forks are dots labelled on hover. */
function treeChart(timelines, onPick) {
  var ids = timelines.map(function (t) { return t.id; }).sort(byLineage);
  var byId = {};
  timelines.forEach(function (t) { byId[t.id] = t; });
  var maxTick = 1;
  timelines.forEach(function (t) { maxTick = Math.max(maxTick, endTick(t)); });
  var left = 70, right = 300, rowH = 26, width = 900;
  var x = function (tick) { return left + (width - left - right) * tick / maxTick; };
  var y = function (id) { return 20 + rowH * ids.indexOf(id); };
  var root = svg("svg", { width: width, height: 30 + rowH * ids.length, "class": "tree", role: "img" });
  for (var k = 0; k <= maxTick; k++) {
    root.appendChild(svg("line", { x1: x(k), x2: x(k), y1: 8, y2: 22 + rowH * ids.length, "class": "axis" }));
    root.appendChild(svg("text", { x: x(k) - 3, y: 10 + rowH * ids.length + 16 }, String(k)));
  }
  ids.forEach(function (id) {
    var t = byId[id], start = t.fork_tick === null ? 0 : t.fork_tick, mass = massOf(t);
    var g = svg("g", { "class": "tl", "data-timeline": id });
    if (t.parent && byId[t.parent]) {
      g.appendChild(svg("line", { x1: x(start), x2: x(start), y1: y(t.parent), y2: y(id),
        stroke: "#98a2b3", "stroke-dasharray": "3 2" }));
    }
    g.appendChild(svg("line", { x1: x(start), x2: x(endTick(t)), y1: y(id), y2: y(id),
      stroke: settlementColour(t), "stroke-width": 2 + 14 * mass, "stroke-linecap": "round" },
      svg("title", null, id + ": path mass " + fmt(mass, 4))));
    g.appendChild(svg("text", { x: 4, y: y(id) + 4 }, id));
    g.appendChild(svg("text", { x: x(endTick(t)) + 12, y: y(id) + 4 }, endLabel(t)));
    (t.forks || []).forEach(function (f) {
      g.appendChild(svg("circle", { cx: x(f.tick), cy: y(id), r: 5, fill: "#fff", stroke: "#1d2430" },
        svg("title", null, "tick " + f.tick + ": fork → " + f.child + " on “" + f.hypothesis + "” p=" + fmt(f.probability, 2))));
    });
    if (t.news) {  /* a continued run's particle: how the news re-weighted it */
      var n = t.news, cx = x(n.tick), cy = y(id);
      g.appendChild(svg("rect", { x: cx - 5, y: cy - 5, width: 10, height: 10, "class": "news",
        fill: n.pruned ? "#fff" : "#1d2430", stroke: "#1d2430" },
        svg("title", null, "tick " + n.tick + ": news " + (n.pruned ? "pruned this timeline" :
          "re-weighted it, mass " + fmt(n.prior, 4) + " → " + fmt(n.posterior, 4) + " (likelihood " + fmt(n.likelihood, 4) + ")"))));
    }
    if (onPick) g.onclick = function () { onPick(id); };
    root.appendChild(g);
  });
  return root;
}

function endTick(t) {
  if (t.end) return t.end.end_tick;
  return t.last_tick === undefined ? (t.fork_tick || 0) : t.last_tick;
}

function massOf(t) { return t.end ? t.end.mass : (t.mass === undefined ? t.mass_start : t.mass); }

function settlementColour(t) {
  if (!t.end) return "#98a2b3";
  if (t.end.settlement === "yes") return "var(--yes)";
  if (t.end.settlement === "no") return "var(--no)";
  return t.end.settlement === "unresolved" ? "var(--open)" : "#7a5af8";
}

function endLabel(t) {
  if (!t.end) return "running (mass " + fmt(massOf(t), 3) + ")";
  var e = t.end;
  var forced = e.forced_p_yes === null || e.forced_p_yes === undefined ? "" : ", forced p " + fmt(e.forced_p_yes, 3);
  return e.status + ": " + e.settlement + forced + " · mass " + fmt(e.mass, 3);
}

/* A line chart: series [{name, points: [[x, y], ...]}], x numeric or ISO dates. */
function lineChart(series, opts) {
  opts = opts || {};
  var W = opts.width || 620, H = opts.height || 240, L = 46, R = 12, T = 12, B = 28;
  var xs = [], ys = [];
  series.forEach(function (s) { s.points.forEach(function (p) { xs.push(xv(p[0])); ys.push(p[1]); }); });
  var root = svg("svg", { width: W, height: H, "class": "chart" });
  if (!xs.length) { root.appendChild(svg("text", { x: L, y: H / 2 }, "no data")); return root; }
  var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
  var y0 = opts.y0 !== undefined ? opts.y0 : Math.min.apply(null, ys);
  var y1 = opts.y1 !== undefined ? opts.y1 : Math.max.apply(null, ys);
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) y1 = y0 + 1;
  var sx = function (v) { return L + (W - L - R) * (xv(v) - x0) / (x1 - x0); };
  var sy = function (v) { return H - B - (H - T - B) * (v - y0) / (y1 - y0); };
  root.appendChild(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, "class": "axis" }));
  root.appendChild(svg("line", { x1: L, x2: L, y1: T, y2: H - B, "class": "axis" }));
  [y0, (y0 + y1) / 2, y1].forEach(function (v) {
    root.appendChild(svg("text", { x: 2, y: sy(v) + 4 }, fmt(v, 2)));
  });
  root.appendChild(svg("text", { x: L, y: H - 8 }, label(series[0].points[0][0])));
  root.appendChild(svg("text", { x: W - R - 70, y: H - 8 }, label(xs.length ? lastX(series) : "")));
  series.forEach(function (s, i) {
    var d = s.points.map(function (p, j) { return (j ? "L" : "M") + sx(p[0]).toFixed(1) + " " + sy(p[1]).toFixed(1); }).join(" ");
    root.appendChild(svg("path", { d: d, fill: "none", stroke: s.colour || PALETTE[i % PALETTE.length], "stroke-width": 2 },
      svg("title", null, s.name)));
  });
  return root;
}

function xv(v) { return typeof v === "number" ? v : Date.parse(v) / 86400000; }
function label(v) { return typeof v === "number" ? String(v) : String(v).slice(0, 10); }
function lastX(series) {
  var best = null;
  series.forEach(function (s) { s.points.forEach(function (p) { if (best === null || xv(p[0]) > xv(best)) best = p[0]; }); });
  return best;
}

function legend(series) {
  return h("div", { "class": "legend" }, series.map(function (s, i) {
    return h("span", null, h("i", { "class": "swatch", style: "background:" + (s.colour || PALETTE[i % PALETTE.length]) }), s.name);
  }));
}

/* A virtualised list: only the rows in view exist in the document, so a list of a hundred
   thousand model calls scrolls as fast as one of ten. */
function virtualList(items, renderRow, onPick, selected) {
  var rowH = 26;
  var box = h("div", { "class": "vlist" });
  var spacer = h("div", { style: "height:" + items.length * rowH + "px" });
  box.appendChild(spacer);
  function draw() {
    var first = Math.max(0, Math.floor(box.scrollTop / rowH) - 5);
    var last = Math.min(items.length, first + Math.ceil((box.clientHeight || 420) / rowH) + 10);
    while (spacer.firstChild) spacer.removeChild(spacer.firstChild);
    for (var i = first; i < last; i++) {
      var row = h("div", { "class": "row" + (i === selected ? " on" : ""), style: "top:" + i * rowH + "px", "data-index": i },
        renderRow(items[i], i));
      row.onclick = (function (j) { return function () { onPick(j); }; })(i);
      spacer.appendChild(row);
    }
  }
  box.addEventListener("scroll", draw);
  draw();
  if (selected !== null && selected !== undefined) setTimeout(function () { box.scrollTop = Math.max(0, selected * rowH - 100); draw(); }, 0);
  return box;
}

/* A table from rows of cells; clicking a header sorts by that column. */
function sortableTable(head, rows) {
  var table = h("table");
  var body = h("tbody");
  var order = { col: -1, dir: 1 };
  function fill() {
    clear(body);
    rows.forEach(function (r) { body.appendChild(h("tr", null, r.map(function (c) { return h("td", typeof c === "number" ? { "class": "num" } : null, typeof c === "number" && !Number.isInteger(c) ? fmt(c, 4) : c); }))); });
  }
  table.appendChild(h("thead", null, h("tr", null, head.map(function (name, i) {
    var th = h("th", { "class": "sortable" }, name);
    th.onclick = function () {
      order.dir = order.col === i ? -order.dir : 1;
      order.col = i;
      rows.sort(function (a, b) { return (a[i] > b[i] ? 1 : a[i] < b[i] ? -1 : 0) * order.dir; });
      fill();
    };
    return th;
  }))));
  table.appendChild(body);
  fill();
  return table;
}
