/* worldsim viewer: a study folder — its jobs, their trace checks, summaries, and scores. */

var FILTERS = [["card", "card_id"], ["method", "method"], ["condition", "condition"],
  ["date", "forecast_date"], ["status", "status"], ["check", "check"]];
var COLUMNS = [["card", "card_id"], ["method", "method"], ["condition", "condition"],
  ["date", "forecast_date"], ["seed", "seed"], ["status", "status"], ["p_yes", "p_yes"],
  ["unresolved", "unresolved_mass"], ["calls", "calls"], ["tokens", "tokens"],
  ["cost $", "cost_usd"], ["trace", "check"]];
var CHECK_TEXT = { ok: "✓ anchored", anchor: "✗ head differs from job log", invalid: "✗ refused",
  absent: "no trace", unlocked: "not in lock" };

/* A link to a job's trace page: the pages folder and the job's path segments, each
   percent-encoded (so no segment can be a scheme, a query or a step up). Never from free text. */
function jobLink(segments) {
  if (!segments || !DATA.files) return null;
  var parts = [DATA.files].concat(segments);
  if (parts.some(function (p) { return !p || p === "." || p === ".." || /[\/\\]/.test(p); })) return null;
  var a = h("a", { "class": "job-link" }, "view");
  a.setAttribute("href", parts.map(encodeURIComponent).join("/"));
  return a;
}

function visibleJobs(state) {
  var jobs = DATA.jobs.filter(function (j) {
    return FILTERS.every(function (f) { return !state[f[0]] || String(j[f[1]]) === state[f[0]]; });
  });
  var col = COLUMNS.filter(function (c) { return c[0] === state.sort; })[0];
  if (col) {
    var dir = state.dir === "desc" ? -1 : 1, k = col[1];
    jobs = jobs.slice().sort(function (a, b) {
      var x = a[k], y = b[k];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;  /* blanks last either way */
      if (y === null || y === undefined) return -1;
      return (x > y ? 1 : -1) * dir;
    });
  }
  return jobs;
}

function filterBar(state) {
  return h("div", { "class": "filters" }, FILTERS.map(function (f) {
    var values = [];
    DATA.jobs.forEach(function (j) { var v = String(j[f[1]]); if (values.indexOf(v) < 0) values.push(v); });
    var select = h("select", { "data-filter": f[0] }, h("option", { value: "" }, f[0] + ": all"),
      values.sort().map(function (v) { return h("option", { value: v, selected: state[f[0]] === v ? "selected" : null }, v); }));
    select.onchange = function () { var p = {}; p[f[0]] = select.value; setState(p); };
    return select;
  }));
}

function jobsTable(state) {
  var jobs = visibleJobs(state);
  var head = h("tr", null, COLUMNS.map(function (c) {
    var on = state.sort === c[0];
    var th = h("th", { "class": "sortable", "data-sort": c[0] }, c[0] + (on ? (state.dir === "desc" ? " ▼" : " ▲") : ""));
    th.onclick = function () { setState({ sort: c[0], dir: on && state.dir !== "desc" ? "desc" : "asc" }); };
    return th;
  }), h("th", null, "page"));
  var body = h("tbody", null, jobs.map(function (j) {
    var check = h("td", { "class": j.check === "ok" ? "ok" : (j.check === "anchor" || j.check === "invalid") ? "bad" : "muted", title: j.check_note },
      CHECK_TEXT[j.check] || j.check);
    return h("tr", { "data-job": [j.card_id, j.method, j.forecast_date, j.seed].join("|"), "data-check": j.check },
      h("td", null, j.card_id), h("td", null, j.method), h("td", null, j.condition), h("td", null, j.forecast_date),
      h("td", { "class": "num" }, j.seed), h("td", { title: j.error || "" }, j.status),
      h("td", { "class": "num" }, j.p_options ? optionsText(j.p_options) : fmt(j.p_yes, 4)),
      h("td", { "class": "num" }, fmt(j.unresolved_mass, 3)), h("td", { "class": "num" }, j.calls),
      h("td", { "class": "num" }, j.tokens), h("td", { "class": "num" }, fmt(j.cost_usd, 4)),
      check, h("td", null, jobLink(j.view)));
  }));
  return [h("p", { id: "shown", "class": "muted" }, jobs.length + " of " + DATA.jobs.length + " jobs"),
    h("table", { id: "jobs" }, h("thead", null, head), body)];
}

function optionsText(options) {
  return Object.keys(options).map(function (k) { return k + " " + fmt(options[k], 3); }).join(", ");
}

function summaryTable() {
  return h("div", { id: "summary" }, sortableTable(
    ["method", "condition", "date", "jobs", "complete", "failed", "pending", "flagged", "mean p_yes", "sd p_yes", "tokens", "cost $"],
    DATA.summary.map(function (s) {
      return [s.method, s.condition, s.forecast_date, s.jobs, s.complete, s.failed, s.pending, s.flagged,
        s.mean_p_yes === null ? "–" : s.mean_p_yes, s.sd_p_yes === null ? "–" : s.sd_p_yes, s.tokens, fmt(s.cost_usd, 4)];
    })));
}

function studyBanner() {
  var counts = {};
  DATA.jobs.forEach(function (j) { counts[j.check] = (counts[j.check] || 0) + 1; });
  var flagged = (counts.anchor || 0) + (counts.invalid || 0) + (counts.absent || 0);
  var banner = h("div", { id: "verification", "class": "banner" + (flagged ? " warn" : ""), "data-status": flagged ? "flagged" : "ok" },
    h("span", null, DATA.jobs.length + " jobs"),
    h("span", { "class": "ok" }, (counts.ok || 0) + " traces verify with the head the job log recorded"),
    flagged ? h("span", { "class": "bad" }, flagged + " flagged (left out of the scores)") : null,
    h("span", { "class": "mono" }, "manifest " + String(DATA.manifest_sha256).slice(0, 12)),
    h("span", null, "worldsim " + DATA.worldsim_version));
  if (!DATA.notes.length) return banner;
  return h("div", null, banner, h("ul", { id: "notes", "class": "warn" },
    DATA.notes.map(function (note) { return h("li", null, note); })));
}

function scoreSection(s) {
  var box = h("section", { id: "scores" }, h("h2", null, "Scores against " + s.labels));
  box.appendChild(h("p", { "class": "muted" }, s.n_units + " units (card × forecast date) over " + s.n_cards +
    " cards; metric " + s.metric + "; " + s.coverage.n_matched + " of " + s.coverage.n_predictions + " predictions labelled"));
  var names = Object.keys(s.methods);
  box.appendChild(h("div", { id: "score-methods" }, sortableTable(["method", "n", "brier", "log", "accuracy", "ece", "runs"],
    names.map(function (m) { var x = s.methods[m]; return [m, x.n, x.brier, x.log, x.accuracy, x.ece === null ? "–" : x.ece, x.n_runs]; }))));
  if (s.comparisons.length) {
    box.appendChild(h("h3", null, "Paired differences: baseline − method (above 0: the method scores better), bootstrap intervals"));
    box.appendChild(h("div", { id: "score-comparisons" }, sortableTable(["baseline", "method", "n", "mean Δ " + s.metric, "lo", "hi", "level"],
      s.comparisons.map(function (c) { return [c.baseline, c.method, c.n, c.mean_delta, c.bootstrap.ci[0], c.bootstrap.ci[1], c.bootstrap.level]; }))));
    box.appendChild(forestPlot(s.comparisons));
  }
  box.appendChild(h("h3", null, "Reliability"));
  box.appendChild(reliabilityDiagram(s.calibration));
  if (s.tables) {
    ["method", "condition", "forecast_date"].forEach(function (key) {
      var by = s.tables.by[key];
      box.appendChild(h("h3", null, "Per " + key + " (units: card × forecast date, seeds averaged)"));
      box.appendChild(h("div", { "class": "study-table", "data-by": key }, sortableTable([key, "units", "brier", "log", "accuracy"],
        Object.keys(by).map(function (k) { return [k].concat(by[k]); }))));
    });
  } else {
    box.appendChild(h("p", { "class": "warn" }, "The tables per method, condition and date need every trace to check out; some are flagged."));
  }
  return box;
}

/* Each comparison's mean difference and interval on one axis through zero. */
function forestPlot(comparisons) {
  var W = 620, rowH = 26, L = 220, R = 20, H = 40 + rowH * comparisons.length;
  var lo = 0, hi = 0;
  comparisons.forEach(function (c) { lo = Math.min(lo, c.bootstrap.ci[0], c.mean_delta); hi = Math.max(hi, c.bootstrap.ci[1], c.mean_delta); });
  if (hi === lo) hi = lo + 1;
  var x = function (v) { return L + (W - L - R) * (v - lo) / (hi - lo); };
  var root = svg("svg", { id: "forest", width: W, height: H, "class": "chart" });
  root.appendChild(svg("line", { x1: x(0), x2: x(0), y1: 6, y2: H - 20, stroke: "#98a2b3", "stroke-dasharray": "3 2" }));
  root.appendChild(svg("text", { x: L, y: H - 4 }, fmt(lo, 3)));
  root.appendChild(svg("text", { x: W - R - 40, y: H - 4 }, fmt(hi, 3)));
  comparisons.forEach(function (c, i) {
    var y = 20 + rowH * i;
    root.appendChild(svg("text", { x: 4, y: y + 4 }, c.baseline + " − " + c.method));
    root.appendChild(svg("line", { x1: x(c.bootstrap.ci[0]), x2: x(c.bootstrap.ci[1]), y1: y, y2: y, stroke: "#1d2430", "stroke-width": 2 }));
    root.appendChild(svg("circle", { cx: x(c.mean_delta), cy: y, r: 4, fill: "#3f6fb5" },
      svg("title", null, "mean Δ " + fmt(c.mean_delta, 4) + " [" + fmt(c.bootstrap.ci[0], 4) + ", " + fmt(c.bootstrap.ci[1], 4) + "]")));
  });
  return root;
}

/* Observed frequency against mean forecast per bin, one series per method, the diagonal. */
function reliabilityDiagram(calibration) {
  var W = 360, H = 360, P = 36;
  var s = function (v) { return P + (W - 2 * P) * v; }, t = function (v) { return H - P - (H - 2 * P) * v; };
  var root = svg("svg", { id: "reliability", width: W, height: H, "class": "chart" });
  root.appendChild(svg("rect", { x: P, y: P, width: W - 2 * P, height: H - 2 * P, fill: "none", stroke: "#d0d5dd" }));
  root.appendChild(svg("line", { x1: s(0), y1: t(0), x2: s(1), y2: t(1), stroke: "#98a2b3", "stroke-dasharray": "3 2" }));
  root.appendChild(svg("text", { x: P, y: H - 8 }, "mean forecast →"));
  root.appendChild(svg("text", { x: 4, y: P - 10 }, "observed frequency ↑"));
  var series = Object.keys(calibration);
  series.forEach(function (m, i) {
    var colour = PALETTE[i % PALETTE.length];
    calibration[m].bins.forEach(function (b) {
      if (!b.count || b.mean_p === null || b.frequency === null) return;
      root.appendChild(svg("circle", { cx: s(b.mean_p), cy: t(b.frequency), r: 3 + Math.min(6, b.count), fill: colour, "fill-opacity": 0.7, "data-method": m },
        svg("title", null, m + ": " + b.count + " in [" + fmt(b.lo, 2) + ", " + fmt(b.hi, 2) + "), mean p " + fmt(b.mean_p, 3) + ", frequency " + fmt(b.frequency, 3))));
    });
  });
  return h("div", null, root, legend(series.map(function (m) { return { name: m }; })));
}

function renderStudy() {
  var state = getState();
  document.getElementById("verification").replaceWith(studyBanner());
  var main = clear(document.getElementById("main"));
  main.appendChild(h("p", { "class": "muted" }, DATA.folder));
  main.appendChild(h("h2", null, "Predictions"));
  main.appendChild(filterBar(state));
  main.appendChild(h("div", null, jobsTable(state)));
  main.appendChild(h("h2", null, "Per method × condition × date"));
  main.appendChild(summaryTable());
  if (DATA.scores) main.appendChild(scoreSection(DATA.scores));
}

window.addEventListener("hashchange", renderStudy);
renderStudy();
