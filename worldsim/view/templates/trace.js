/* worldsim viewer: one trace. Views: the multiverse tree, the tick stepper, model calls,
   evidence, charts; the URL fragment says which, and where (#view=ticks&tick=3&tl=t0.1). */

var TICKS = DATA.ticks.map(function (s) { return s.tick; }).filter(function (k, i, a) { return a.indexOf(k) === i; });
var TIMELINE_IDS = DATA.timelines.map(function (t) { return t.id; });
/* Big traces show one timeline per page in the tick view (docs/viewer.md). */
var PAGED = DATA_BYTES > DATA.page_bytes || TIMELINE_IDS.length > 16;
var VIEWS = { tree: treeView, ticks: tickView, calls: callsView, evidence: evidenceView, charts: chartsView };

function render() {
  var state = getState();
  var view = VIEWS[state.view] ? state.view : "tree";
  document.querySelectorAll("#tabs a").forEach(function (a) {
    a.className = a.getAttribute("data-view") === view ? "on" : "";
  });
  var main = clear(document.getElementById("main"));
  main.setAttribute("data-view", view);
  VIEWS[view](main, state);
}

function header() {
  var m = DATA.meta;
  document.getElementById("title").textContent = (m.card || "trace") + " · " + m.policy + " · seed " + m.seed;
  var banner = verificationBanner(DATA.verification);
  banner.id = "verification";
  document.getElementById("verification").replaceWith(banner);
  document.getElementById("top").appendChild(h("p", { "class": "muted" },
    m.question, " — cut-off " + (m.as_of || "–").slice(0, 10) + ", deadline " + (m.deadline || "–").slice(0, 10) +
    " · model " + m.model + " · run " + m.run + " · worldsim " + m.worldsim_version));
  (DATA.interventions || []).forEach(function (iv) {
    document.getElementById("top").appendChild(h("p", { "class": iv.applied ? "warn intervention" : "muted intervention" },
      "intervention " + iv.id + " (" + iv.kind + ") at " + iv.at.slice(0, 10) + ", tick " + iv.tick + ": " +
      (iv.title || "") + " — " + (iv.applied ? "applied" : "not applied: " + iv.reason)));
  });
  document.querySelectorAll("#tabs a").forEach(function (a) {
    a.onclick = function () { setState({ view: a.getAttribute("data-view") }); };
  });
}

/* --- the multiverse ------------------------------------------------------------------------ */

function treeView(main) {
  main.appendChild(h("h2", null, "Multiverse"));
  main.appendChild(h("p", { "class": "muted" }, "Line width: path mass. Colour: settlement (green yes, red no, blue unresolved, purple settled at a probability (expected) or at an option, grey running). Dots: forks. Click a timeline to step through it."));
  main.appendChild(treeChart(DATA.timelines, function (id) { setState({ view: "ticks", tl: id }); }));
  if (DATA.continuation) main.appendChild(continuationCard(DATA.continuation));
  main.appendChild(forecastCard());
  main.appendChild(h("h2", null, "Fork points"));
  var rows = [];
  DATA.timelines.forEach(function (t) {
    t.forks.forEach(function (f) { rows.push([f.tick, t.id, "admitted → " + f.child, f.hypothesis, f.endpoint, fmt(f.probability, 3), "child mass " + fmt(f.mass_child, 4)]); });
    t.rejected.forEach(function (r) {
      rows.push([r.tick, t.id, "rejected", r.hypothesis, r.endpoint, fmt(r.probability, 3),
        r.reason + (r.came_true === null ? "" : r.came_true ? " (sampled: came true)" : " (sampled: did not)")]);
    });
  });
  rows.sort(function (a, b) { return a[0] - b[0] || byLineage(a[1], b[1]); });
  main.appendChild(rows.length ? sortableTable(["tick", "timeline", "decision", "hypothesis", "endpoint", "p", "why"], rows)
    : h("p", { "class": "muted" }, "No fork was proposed."));
}

function continuationCard(c) {
  /* a continued run: the forecast's path across dates, the news and which timeline it moved */
  var p = c.parent, card = h("div", { "class": "card continuation" });
  card.appendChild(h("h3", null, "Carried forward from run " + p.run + " at tick " + p.tick));
  card.appendChild(h("p", { "class": "muted" }, "parent " + p.path + " · news published in [" +
    p.since.slice(0, 10) + ", " + p.as_of.slice(0, 10) + ") · squares on the tree: re-weighted (hollow: pruned)"));
  card.appendChild(h("h4", null, "The forecast across dates"));
  card.appendChild(sortableTable(["date", "p_yes", "trace"], c.path.map(function (x) {
    return [String(x.date).slice(0, 19), fmt(x.p_yes, 4), x.file];
  })));
  card.appendChild(h("h4", null, "News"));
  card.appendChild(c.news.length ? sortableTable(["date", "document", "stance", "title"], c.news.map(function (n) {
    return [n.published_at.slice(0, 10), n.id, n.stance === null ? "–" : fmt(n.stance, 2), n.title];
  })) : h("p", { "class": "muted" }, "No news in that window: every likelihood is 1."));
  var w = c.reweighting;
  if (w) {
    card.appendChild(h("h4", null, "Re-weighting (effective paths " + fmt(w.effective_paths, 3) + ")"));
    card.appendChild(sortableTable(["timeline", "mass before", "likelihood", "mass after", ""], w.rows.map(function (r) {
      return [r.timeline, fmt(r.prior, 4), fmt(r.likelihood, 4), fmt(r.posterior, 4), r.pruned ? "pruned" : ""];
    })));
  }
  return card;
}

function forecastCard() {
  var x = DATA.extraction;
  var card = h("div", { "class": "card", id: "forecast" }, h("h3", null, "Forecast"));
  if (!x) { card.appendChild(h("p", { "class": "warn" }, "No extraction recorded (the run did not finish).")); return card; }
  var value = x.p_options ? Object.keys(x.p_options).map(function (k) { return k + " " + fmt(x.p_options[k], 3); }).join(", ") : "p_yes " + fmt(x.p_yes, 4);
  card.appendChild(h("p", null, h("strong", null, value), " under " + x.rule + " · unresolved mass " + fmt(x.unresolved_mass, 3) +
    " · effective paths " + fmt(x.effective_paths, 2) + " · mass sum " + fmt(x.mass_sum, 6)));
  card.appendChild(sortableTable(["leaf", "mass", "settlement", "value"], (x.leaves || []).map(function (l) {
    return [l.timeline, l.mass, l.settlement, l.value === null ? "–" : l.value];
  })));
  return card;
}

/* --- the tick stepper ---------------------------------------------------------------------- */

function tickView(main, state) {
  if (!TICKS.length) { main.appendChild(h("p", { "class": "muted" }, "This trace has no committed tick.")); return; }
  var tick = TICKS.indexOf(Number(state.tick)) >= 0 ? Number(state.tick) : TICKS[0];
  var steps = DATA.ticks.filter(function (s) { return s.tick === tick; });
  var shown = TIMELINE_IDS.indexOf(state.tl) >= 0 ? state.tl : (PAGED ? steps[0].timeline : "");
  var slider = h("input", { type: "range", min: 0, max: TICKS.length - 1, value: TICKS.indexOf(tick), id: "tick-slider" });
  slider.oninput = function () { setState({ tick: TICKS[Number(slider.value)] }); };
  var pick = h("select", { id: "tl-select" }, PAGED ? null : h("option", { value: "" }, "all timelines"),
    TIMELINE_IDS.map(function (id) { return h("option", { value: id, selected: id === shown ? "selected" : null }, id); }));
  pick.onchange = function () { setState({ tl: pick.value }); };
  main.appendChild(h("div", { "class": "stepper" },
    button("◀", function () { step(-1); }), slider, button("▶", function () { step(1); }),
    h("strong", { id: "tick-label" }, "tick " + tick), h("span", { "class": "muted" }, steps.length ? steps[0].date : ""),
    pick, h("span", { "class": "muted" }, PAGED ? "one timeline per page ([ and ] to turn)" : "← → to step")));
  var visible = steps.filter(function (s) { return !shown || s.timeline === shown; });
  if (!visible.length) main.appendChild(h("p", { "class": "muted" }, shown + " has no committed tick " + tick + "."));
  visible.forEach(function (s) { main.appendChild(stepCard(s)); });
}

function step(delta) {
  var state = getState();
  var i = TICKS.indexOf(Number(state.tick));
  i = Math.min(TICKS.length - 1, Math.max(0, (i < 0 ? 0 : i) + delta));
  setState({ view: "ticks", tick: TICKS[i] });
}

function turnPage(delta) {
  var state = getState();
  var i = Math.max(0, TIMELINE_IDS.indexOf(state.tl));
  setState({ view: "ticks", tl: TIMELINE_IDS[Math.min(TIMELINE_IDS.length - 1, Math.max(0, i + delta))] });
}

function button(text, onclick) { return h("button", { type: "button", onclick: onclick }, text); }

function stepCard(s) {
  var card = h("section", { "class": "card step", "data-timeline": s.timeline, "data-tick": s.tick },
    h("h3", null, s.timeline + " · tick " + s.tick + " · " + (s.date || "") + " · mass " + fmt(s.mass, 4) + " · " + s.status));
  if (s.observations.length) {
    card.appendChild(h("ul", { "class": "moves" }, s.observations.map(function (o) { return h("li", null, h("span", { "class": "tag" }, "event"), o.id + ": " + o.title); })));
  }
  card.appendChild(h("h3", null, "Proposals"));
  card.appendChild(h("ul", { "class": "moves proposals" }, s.proposals.map(function (p) {
    return h("li", { "class": "proposal" },
      h("span", { "class": "mark " + (p.accepted ? "ok" : "bad"), title: p.accepted ? "accepted" : "not accepted" }, p.accepted ? "✓" : "✗"),
      h("strong", null, p.agent + "#" + p.index), " ", h("span", { "class": "tag" }, p.kind),
      p.endpoint ? h("span", { "class": "tag" }, p.endpoint + " " + (p.direction >= 0 ? "+" : "") + fmt(p.direction, 2) + " × " + fmt(p.magnitude, 2)) : null,
      h("span", { "class": "summary" }, p.summary),
      p.cites.length ? h("span", { "class": "muted" }, " cites " + p.cites.join(", ")) : null,
      p.unretrieved.length ? h("span", { "class": "bad" }, " never retrieved: " + p.unretrieved.join(", ")) : null);
  })));
  var r = s.review;
  if (r) {
    card.appendChild(h("h3", null, "Review"));
    card.appendChild(h("p", { "class": "review" }, h("strong", null, r.decision), " — ", r.reason, h("span", { "class": "muted" }, " (" + r.agent + ", " + r.deltas + " state changes)")));
    if (s.rejected.length) card.appendChild(h("ul", { "class": "moves" }, s.rejected.map(function (x) { return h("li", null, h("span", { "class": "mark bad" }, "✗"), x.proposal + ": " + x.reason); })));
    if (r.ledger.length) {
      card.appendChild(sortableTable(["endpoint", "status", "evidence", "ref", "note"], r.ledger.map(function (u) {
        var e = u.evidence || {};
        return [u.endpoint, u.status || "", e.kind || "", e.ref || "", e.note || ""];
      })));
    }
  }
  s.ledger_changes.forEach(function (c) { card.appendChild(h("p", { "class": "ledger" }, h("strong", null, "ledger " + c.endpoint + ": " + c.from + " → " + c.to))); });
  s.forks.forEach(function (f) { card.appendChild(h("p", null, "fork → " + f.child + " on “", f.hypothesis, "” p=" + fmt(f.probability, 3) + ", child mass " + fmt(f.mass_child, 4))); });
  s.fork_rejections.forEach(function (f) { card.appendChild(h("p", { "class": "muted" }, "fork rejected: “", f.hypothesis, "” — " + f.reason)); });
  card.appendChild(h("p", { "class": "muted mono" },
    "p " + Object.keys(s.probs).map(function (k) { return k + "=" + fmt(s.probs[k], 3); }).join(" ") +
    " · pressure " + Object.keys(s.pressure).map(function (k) { return k + "=" + fmt(s.pressure[k], 3); }).join(" ") +
    " · digest " + s.digest.slice(0, 12)));
  return card;
}

/* --- model calls --------------------------------------------------------------------------- */

function callStatus(c) {
  if (c.error) return "error";
  if (c.errors.length) return "retried";
  return c.cache === "hit" ? "cached" : "ok";
}

function callsView(main, state) {
  var calls = DATA.calls;
  main.appendChild(h("h2", null, "Model calls (" + calls.length + ")"));
  if (!calls.length) { main.appendChild(h("p", { "class": "muted" }, "No model call was recorded: the offline model answers in process.")); return; }
  var roles = unique(calls.map(function (c) { return c.role; }));
  var q = h("input", { type: "search", placeholder: "search agent, prompt, reply, error…", value: state.q || "", id: "call-search" });
  var role = select("call-role", ["", "any role"], roles, state.role);
  var tl = select("call-tl", ["", "any timeline"], unique(calls.map(function (c) { return c.tl; }).filter(Boolean)).sort(byLineage), state.ctl);
  var tick = h("input", { type: "number", min: 0, placeholder: "tick", value: state.ctick || "", style: "width:5em", id: "call-tick" });
  var status = select("call-status", ["", "any status"], ["ok", "cached", "retried", "error"], state.status);
  var listBox = h("div"), detail = h("div", { id: "call-detail" });
  function apply() {
    setState({ q: q.value, role: role.value, ctl: tl.value, ctick: tick.value, status: status.value }, true);
    var needle = q.value.toLowerCase();
    var shown = [];
    calls.forEach(function (c, i) {
      if (role.value && c.role !== role.value) return;
      if (tl.value && c.tl !== tl.value) return;
      if (tick.value !== "" && c.tick !== Number(tick.value)) return;
      if (status.value && callStatus(c) !== status.value) return;
      if (needle && [c.agent, c.role, c.route, c.reply, c.error, promptText(c)].join("\n").toLowerCase().indexOf(needle) < 0) return;
      shown.push(i);
    });
    clear(listBox).appendChild(h("p", { "class": "muted" }, shown.length + " shown"));
    var sel = shown.indexOf(Number(getState().call));
    listBox.appendChild(virtualList(shown, function (i) {
      var c = calls[i];
      return [h("span", { "class": "mark " + (callStatus(c) === "error" ? "bad" : "ok") }, callStatus(c) === "error" ? "✗" : "✓"),
        "#" + i + " " + c.role + " · " + c.agent + " · " + (c.tl || "run") + (c.tick === null ? "" : " tick " + c.tick) +
        " · " + c.route + " · " + fmt(c.latency_s, 2) + " s · " + callStatus(c)];
    }, function (j) { setState({ call: shown[j] }, true); apply(); }, sel >= 0 ? sel : null));
    showCall(detail, calls[Number(getState().call)]);
  }
  [q, role, tl, tick, status].forEach(function (el) { el.oninput = apply; });
  main.appendChild(h("div", { "class": "filters" }, q, role, tl, tick, status));
  main.appendChild(listBox);
  main.appendChild(detail);
  apply();
}

function showCall(box, c) {
  clear(box);
  if (!c) return;
  var t = c.tokens;
  box.appendChild(h("div", { "class": "card" },
    h("h3", null, c.role + " · " + c.agent + " · " + (c.tl || "run") + (c.tick === null ? "" : " · tick " + c.tick)),
    sortableTable(["field", "value"], [
      ["route", c.route + (c.resolved ? " (" + c.resolved + ")" : "")], ["prompt version", c.prompt_version],
      ["request hash", c.request_hash], ["tokens in / cached / out / reasoning", t.join(" / ")],
      ["latency", fmt(c.latency_s, 3) + " s"], ["attempts", c.attempts], ["cache", c.cache],
      ["cost", c.cost_usd === null ? "unpriced" : "$" + fmt(c.cost_usd, 6)], ["finish", c.finish || "–"],
      ["error", c.error || "–"]]),
    c.errors.length ? sortableTable(["attempt", "kind", "status", "message", "wait s"], c.errors.map(function (e) {
      return [e.attempt, e.kind, e.status === null ? "–" : e.status, e.message, e.wait_s === null ? "–" : e.wait_s];
    })) : null,
    h("details", { id: "call-prompt" }, h("summary", null, "prompt (" + c.messages.length + " messages, " +
      c.messages.reduce(function (n, m) { return n + m.content.length; }, 0) + " characters)"),
      h("pre", { "class": "reply" }, c.messages.map(function (m) { return "[" + m.role + "]\n" + m.content; }).join("\n\n"))),
    h("details", null, h("summary", null, "reply (" + (c.reply || "").length + " characters)"), h("pre", { "class": "reply" }, c.reply || "")),
    c.tool_calls.length ? h("details", null, h("summary", null, "tool calls (" + c.tool_calls.length + ")"),
      h("pre", null, c.tool_calls.map(function (x) { return x.name + " " + x.arguments; }).join("\n"))) : null));
}

function promptText(c) {
  return (c.messages || []).map(function (m) { return m.content; }).join("\n");
}

function unique(xs) { return xs.filter(function (x, i) { return xs.indexOf(x) === i; }); }

function select(id, first, values, chosen) {
  return h("select", { id: id }, h("option", { value: first[0] }, first[1]),
    values.map(function (v) { return h("option", { value: v, selected: v === chosen ? "selected" : null }, v); }));
}

/* --- evidence ------------------------------------------------------------------------------ */

function evidenceView(main) {
  var docs = DATA.documents, uses = {};
  function use(id, k) { (uses[id] = uses[id] || { returned: 0, opened: 0, cited: 0 })[k]++; }
  DATA.retrievals.forEach(function (r) {
    if (r.tool === "open_document" || r.doc_id) { if (!r.refused && r.doc_id) use(r.doc_id, "opened"); }
    else r.doc_ids.forEach(function (id) { use(id, "returned"); });
  });
  DATA.ticks.forEach(function (s) { s.proposals.forEach(function (p) { p.cites.forEach(function (id) { use(id, "cited"); }); }); });
  main.appendChild(h("h2", null, "Documents (dates relative to the cut-off " + (DATA.meta.as_of || "–").slice(0, 10) + ")"));
  var ids = unique(Object.keys(docs).concat(Object.keys(uses))).sort();
  main.appendChild(sortableTable(["document", "title", "source", "published", "days", "returned", "opened", "cited"], ids.map(function (id) {
    var d = docs[id] || {}, u = uses[id] || { returned: 0, opened: 0, cited: 0 };
    return [id, d.title || "(not in the card)", d.source || "", (d.published_at || "").slice(0, 10),
      d.days === null || d.days === undefined ? "–" : (d.days < 0 ? "" : "+") + d.days.toFixed(1) + " d", u.returned, u.opened, u.cited];
  })));
  main.appendChild(h("h2", null, "Gateway accesses (" + DATA.retrievals.length + ")"));
  main.appendChild(virtualList(DATA.retrievals, function (r) {
    return [h("span", { "class": "mark " + (r.refused ? "bad" : "ok") }, r.refused ? "✗" : "✓"),
      (r.timeline || "run") + (r.tick === null || r.tick === undefined ? "" : " tick " + r.tick) + " · " + r.agent + " · " + r.tool + " · " +
      (r.query ? "“" + r.query + "” → " + r.doc_ids.join(", ") : (r.doc_id || "")) + (r.refused ? " refused: " + r.reason : "")];
  }, function () {}, null));
  graphSection(main);
  reportSection(main);
}

/* The forecast-time causal graph the run wrote (graph conditions only): what KER is scored on. */
function graphSection(main) {
  var g = DATA.forecast_graph;
  main.appendChild(h("h2", { id: "forecast-graph" }, "Forecast graph" + (g ? " (" + g.events.length + " events, " + g.link_count + " links)" : "")));
  if (!g) {
    main.appendChild(h("p", { "class": "muted" }, "None: this run's condition builds no forecast graph, so KER is not defined for it."));
    return;
  }
  main.appendChild(virtualList(g.events, function (e) {
    return [(e.timeline || "") + (e.tick === null ? "" : " tick " + e.tick) + " · " + (e.kind || "") + " · " + e.title];
  }, function () {}, null));
}

function reportSection(main) {
  var rep = DATA.report, audit = DATA.audit;
  main.appendChild(h("h2", null, "Report"));
  if (!rep) { main.appendChild(h("p", { "class": "muted" }, "No report recorded.")); return; }
  main.appendChild(h("p", { id: "report-summary" }, rep.summary));
  if (audit) {
    var grounded = audit.report_grounding;
    main.appendChild(h("p", { "class": grounded === "grounded" ? "ok" : grounded === "ungrounded" ? "bad" : "muted" },
      "grounding: " + grounded + (audit.ungrounded_refs.length ? " — ungrounded: " + audit.ungrounded_refs.join("; ") : "")));
  }
  main.appendChild(h("ul", { "class": "claims" }, rep.claims.map(function (c) {
    return h("li", null, c.text, " ", c.refs.map(function (r) {
      return h("span", { "class": "tag" }, Object.keys(r).filter(function (k) { return r[k] !== null; }).map(function (k) { return k + " " + r[k]; }).join(", "));
    }));
  })));
  if (audit) {
    main.appendChild(h("h2", null, "Audit"));
    main.appendChild(sortableTable(["check", "value"], Object.keys(audit).map(function (k) {
      var v = audit[k];
      return [k, Array.isArray(v) ? (v.map(function (x) { return typeof x === "object" ? JSON.stringify(x) : x; }).join("; ") || "none") : String(v)];
    })));
  }
}

/* --- charts -------------------------------------------------------------------------------- */

function chartsView(main, state) {
  var scored = DATA.endpoints.filter(function (e) { return e.kind === "scored"; }).map(function (e) { return e.id; });
  var ep = scored.indexOf(state.ep) >= 0 ? state.ep : scored[0];
  var pick = select("chart-endpoint", [ep, ep], scored.filter(function (x) { return x !== ep; }), ep);
  pick.onchange = function () { setState({ ep: pick.value }); };
  main.appendChild(h("h2", null, "Endpoint probability over ticks, per timeline ", pick));
  var series = TIMELINE_IDS.map(function (id) {
    return { name: id, points: DATA.ticks.filter(function (s) { return s.timeline === id; }).map(function (s) { return [s.tick, s.probs[ep]]; }) };
  }).filter(function (s) { return s.points.length; });
  main.appendChild(lineChart(series, { y0: 0, y1: 1 }));
  main.appendChild(legend(series));
  main.appendChild(h("h2", null, "Path mass by branch (at each timeline's end)"));
  main.appendChild(sortableTable(["timeline", "mass", "", "settlement"], DATA.timelines.map(function (t) {
    return [t.id, massOf(t), h("span", { "class": "bar", style: "width:" + Math.round(300 * massOf(t)) + "px" }), t.end ? t.end.settlement : "running"];
  })));
  var p = DATA.pressure, pressure = [{ name: "simulated (mass-weighted p_yes)", points: p.simulated }];
  if (p.causal) pressure.push({ name: "causal pressure (hindsight)", points: p.causal });
  main.appendChild(h("h2", null, "Pressure"));
  if (!p.causal) main.appendChild(h("p", { "class": "muted" }, "Give a hindsight graph (worldsim view --hindsight GRAPH) to chart the causal pressure beside it."));
  pressure.forEach(function (s, i) { main.appendChild(lineChart([{ name: s.name, points: s.points, colour: PALETTE[i] }], { height: 180 })); });
  main.appendChild(legend(pressure));
}

/* --- start --------------------------------------------------------------------------------- */

document.addEventListener("keydown", function (e) {
  if (e.target && /INPUT|SELECT|TEXTAREA/.test(e.target.tagName) && e.target.type !== "range") return;
  if (e.key === "ArrowRight") step(1);
  else if (e.key === "ArrowLeft") step(-1);
  else if (PAGED && e.key === "]") turnPage(1);
  else if (PAGED && e.key === "[") turnPage(-1);
  else return;
  e.preventDefault();
});
window.addEventListener("hashchange", render);
header();
render();
