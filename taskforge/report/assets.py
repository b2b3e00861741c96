"""The report page's inline stylesheet and scripts (no CDN, no network: the file opens anywhere).

``JS`` does two things: filter the task table as you type (every word must occur in the row's
instance id, repo, strategy or entities), and show a clicked task's problem statement, gold patch
and test patch side by side, diff lines colored. Patches are written with ``textContent`` only.

``FIGURES_JS`` runs after the inlined Vega bundle: it draws each ``<figure class="plot">`` from its
spec in the ``figure-specs`` JSON with ``vegaEmbed`` (SVG renderer, no action menu). (vega-embed logs
one console warning per figure, "The compiled spec uses Vega v5, but current version is v6.2.0":
vl-convert pairs Vega-Lite 5 with Vega 6, for the card's PNGs as here; the bundle exposes no
Vega-Lite compiler to compile with first.) A drawn figure
gets ``data-rendered="1"``; one that fails shows a one-line error in its place and gets
``data-rendered="error"``. When every figure is settled, ``<body>`` gets ``data-figures="done"`` and
``data-figures-ms`` (``performance.now()`` then: milliseconds since navigation started).
"""

CSS = """
:root { --fg:#1d2433; --muted:#5c6579; --line:#dde1e8; --bg:#f6f7f9; --card:#fff; --acc:#4c78a8;
        --add-bg:#e6ffec; --add-fg:#116329; --del-bg:#ffebe9; --del-fg:#82071e; --hunk:#0550ae; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); }
header, section { max-width: 1440px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 20px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 10px 0 6px; }
h4 { font-size: 13px; margin: 0 0 6px; color: var(--muted); text-transform: uppercase; letter-spacing: .03em; }
.meta, .note { color: var(--muted); }
nav a { margin-right: 14px; color: var(--acc); text-decoration: none; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; min-width: 120px; }
.card b { display: block; font-size: 20px; }
.card span { color: var(--muted); font-size: 12px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 14px; align-items: start; }
figure.plot { margin: 0; background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 8px; }
figure.plot .vis { min-height: 120px; }
figure.plot .vis.vega-embed { display: block; }
figure.plot svg { display: block; max-width: 100%; height: auto; }
figure.plot .plot-error { color: var(--del-fg); background: var(--del-bg); padding: 6px 8px; border-radius: 6px;
                          margin: 0; font-size: 13px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
figure.plot figcaption { color: var(--muted); font-size: 12px; margin-top: 4px; }
table { border-collapse: collapse; width: 100%; background: var(--card); }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: #eef0f4; font-weight: 600; position: sticky; top: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.table-wrap { max-height: 420px; overflow: auto; border: 1px solid var(--line); border-radius: 8px; }
#task-table tbody tr { cursor: pointer; }
#task-table tbody tr:hover { background: #f0f4fa; }
#task-table tbody tr.selected { background: #dbe7f5; }
.badge { display: inline-block; padding: 0 6px; border-radius: 9px; font-size: 12px; color: #fff; }
.ok { background: #54a24b; } .bad { background: #e45756; }
.toolbar { display: flex; gap: 12px; align-items: center; margin-bottom: 8px; }
#task-filter { flex: 1; max-width: 480px; padding: 6px 10px; font-size: 14px; border: 1px solid var(--line);
               border-radius: 6px; }
#task-detail { margin-top: 14px; background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px; }
.triple { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 12px; }
pre { margin: 0; padding: 8px; background: #fafbfc; border: 1px solid var(--line); border-radius: 6px;
      max-height: 70vh; overflow: auto; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre.prose { white-space: pre-wrap; font-family: inherit; font-size: 13px; }
pre.diff .lines { display: inline-block; min-width: 100%; }
pre.diff span { display: block; white-space: pre; }
.d-add { background: var(--add-bg); color: var(--add-fg); }
.d-del { background: var(--del-bg); color: var(--del-fg); }
.d-hunk { color: var(--hunk); background: #ddf4ff; }
.d-file { font-weight: 600; color: var(--muted); }
details summary { cursor: pointer; color: var(--acc); }
footer { max-width: 1440px; margin: 30px auto; padding: 0 24px; color: var(--muted); font-size: 12px; }
"""

JS = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("task-data").textContent);
  var byId = {};
  data.tasks.forEach(function (t) { byId[t.instance_id] = t; });
  var rows = Array.prototype.slice.call(document.querySelectorAll("#task-table tbody tr"));
  var filter = document.getElementById("task-filter");
  var count = document.getElementById("task-count");

  function applyFilter() {
    var words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (r) {
      var text = r.getAttribute("data-search");
      var ok = words.every(function (w) { return text.indexOf(w) >= 0; });
      r.hidden = !ok;
      if (ok) { shown += 1; }
    });
    count.textContent = shown + " of " + rows.length + " tasks";
  }

  function diffClass(line) {
    if (line.lastIndexOf("diff ", 0) === 0 || line.lastIndexOf("+++", 0) === 0 || line.lastIndexOf("---", 0) === 0) {
      return "d-file";
    }
    if (line.lastIndexOf("@@", 0) === 0) { return "d-hunk"; }
    if (line.charAt(0) === "+") { return "d-add"; }
    if (line.charAt(0) === "-") { return "d-del"; }
    return "d-ctx";
  }

  function showDiff(pre, text) {
    pre.textContent = "";
    var frag = document.createElement("div");
    frag.className = "lines";
    text.replace(/\\n$/, "").split("\\n").forEach(function (line) {
      var span = document.createElement("span");
      span.className = diffClass(line);
      span.textContent = line;
      frag.appendChild(span);
    });
    pre.appendChild(frag);
  }

  function show(id) {
    var t = byId[id];
    if (!t) { return; }
    rows.forEach(function (r) { r.classList.toggle("selected", r.getAttribute("data-id") === id); });
    var box = document.getElementById("task-detail");
    box.hidden = false;
    box.setAttribute("data-instance", id);
    document.getElementById("detail-title").textContent = id;
    document.getElementById("detail-meta").textContent =
      t.repo + " · " + t.strategy + " (tier " + t.tier + ") · difficulty " + t.score.toFixed(3) + " · " +
      t.lines_deleted + " lines deleted · entities: " + t.entities.join(", ") + " · FAIL_TO_PASS " +
      t.fail_to_pass + " · PASS_TO_PASS " + t.pass_to_pass + " · audit " + (t.audit_hits.length ? "LEAK" : "clean");
    document.getElementById("detail-problem").textContent = t.problem_statement;
    showDiff(document.getElementById("detail-patch"), t.patch);
    showDiff(document.getElementById("detail-tests"), t.test_patch);
    var more = t.fail_to_pass - t.fail_to_pass_ids.length;
    document.getElementById("detail-f2p").textContent =
      t.fail_to_pass_ids.join("\\n") + (more > 0 ? "\\n... and " + more + " more" : "");
    if (window.location.hash !== "#task=" + encodeURIComponent(id)) {
      history.replaceState(null, "", "#task=" + encodeURIComponent(id));
    }
  }

  rows.forEach(function (r) {
    r.addEventListener("click", function () { show(r.getAttribute("data-id")); });
    r.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); show(r.getAttribute("data-id")); }
    });
  });
  filter.addEventListener("input", applyFilter);
  applyFilter();
  var m = /^#task=(.+)$/.exec(window.location.hash);
  if (m) { show(decodeURIComponent(m[1])); }
})();
"""

FIGURES_JS = """
(function () {
  "use strict";
  var specs = JSON.parse(document.getElementById("figure-specs").textContent);
  var figures = Array.prototype.slice.call(document.querySelectorAll("figure.plot"));

  function fail(fig, err) {
    var text = String((err && err.message) || err).split("\\n")[0];
    var p = document.createElement("p");
    p.className = "plot-error";
    p.textContent = "Figure not drawn: " + text;
    p.title = p.textContent;
    var vis = fig.querySelector(".vis");
    while (vis.firstChild) { vis.removeChild(vis.firstChild); }
    vis.appendChild(p);
    fig.setAttribute("data-rendered", "error");
  }

  function draw(fig) {
    var key = fig.getAttribute("data-key");
    try {
      if (typeof window.vegaEmbed !== "function") { throw new Error("the inlined Vega bundle did not load"); }
      if (!Object.prototype.hasOwnProperty.call(specs, key)) { throw new Error("no spec for figure " + key); }
      return window.vegaEmbed(fig.querySelector(".vis"), specs[key], {renderer: "svg", actions: false, mode: "vega-lite"})
        .then(function () { fig.setAttribute("data-rendered", "1"); }, function (err) { fail(fig, err); });
    } catch (err) {
      fail(fig, err);
      return Promise.resolve();
    }
  }

  Promise.all(figures.map(draw)).then(function () {
    document.body.setAttribute("data-figures-ms", String(Math.round(performance.now())));
    document.body.setAttribute("data-figures", "done");
  });
})();
"""
