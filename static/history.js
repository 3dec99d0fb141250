// Longer ranges for the charts (1 h, 24 h, 7 d from the GPU history in
// the database), the cluster's jobs by state, a GPU's detail chart (live
// over the gpu:<uuid> topic) and a team page kept live over team:<name>.
// The live 10-minute charts are charts.js's; a range button hides a live
// chart and shows its history beside it, or back.
(function () {
  "use strict";
  var GB = 1024;
  var REFRESH = 60000; // history charts reload each minute
  var SPAN = { "10m": 600, "1h": 3600, "24h": 86400, "7d": 604800 }; // seconds each range shows

  var live = window.gpuportalLive, width = live.width, timeAxis = live.timeAxis, timeScale = live.timeScale;
  // stored: the server is a follower replica, with no live readings
  // (machines report to the leader). Its charts draw the stored history
  // for every range, the 10 minutes included (the server answers them
  // from its minute rows), and reload each minute.
  var stored = document.body.dataset.charts === "stored";

  // follow subscribes to one topic and calls handler(type, data) for each
  // message; it returns a function that stops.
  function follow(topic, handler) {
    return live.follow([topic], function (t, type, data) { handler(type, data); });
  }

  function getJSON(url, done) {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error(url + ": " + r.status); } return r.json(); })
      .then(done)
      .catch(function (err) { console.warn("gpuportal history:", err); });
  }

  var COLORS = ["#2458d6", "#1e8a4c", "#b7791f", "#c53030", "#6b46c1", "#2c7a7b", "#d53f8c", "#4a5568"];
  function line(label, i, scale) {
    var s = { label: label, stroke: COLORS[i % COLORS.length], width: 1.5, points: { show: false } };
    if (scale) { s.scale = scale; }
    return s;
  }

  // historyBox returns the element beside the live chart #id where its
  // history is drawn, made on first use.
  function historyBox(id, className) {
    var box = document.getElementById(id + "-history");
    if (!box) {
      box = document.createElement("div");
      box.id = id + "-history";
      box.className = className;
      var live = document.getElementById(id);
      live.parentNode.insertBefore(box, live.nextSibling);
    }
    return box;
  }

  // ranges wires the range buttons of chart id: onRange(range) draws.
  function ranges(id, onRange) {
    var group = document.querySelector('.ranges[data-chart="' + id + '"]');
    if (!group) { return; }
    var timer = null;
    group.addEventListener("click", function (ev) {
      var b = ev.target.closest("button[data-range]");
      if (!b) { return; }
      group.querySelectorAll("button").forEach(function (x) {
        x.classList.toggle("on", x === b);
        x.setAttribute("aria-pressed", x === b ? "true" : "false");
      });
      var r = b.dataset.range;
      clearInterval(timer);
      onRange(r);
      if (stored || r !== "10m") { timer = setInterval(function () { onRange(r); }, REFRESH); }
    });
    if (stored) {
      onRange("10m");
      timer = setInterval(function () { onRange("10m"); }, REFRESH);
    }
  }

  // swap shows the live chart #id for 10m and its history box otherwise
  // (always, where the charts are stored).
  function swap(id, r, className) {
    var live = document.getElementById(id), box = historyBox(id, className);
    live.hidden = stored || r !== "10m";
    box.hidden = !stored && r === "10m";
    box.dataset.range = r;
    return box;
  }

  // plot draws data into el, replacing what was there.
  function plot(el, opts, data) {
    if (el._u) { el._u.destroy(); }
    el.innerHTML = "";
    opts.width = opts.width || width(el);
    el._u = new uPlot(opts, data, el);
    return el._u;
  }

  // window_ is the time axis of a chart over range r whose points are at
  // times ts: from its first point (or the range's start, when the
  // points go back further) to now. The job counts come once a minute,
  // and an axis scaled to them ended at the last full minute: on a new
  // server the jobs chart spanned 07:04:00-07:04:55 under a utilization
  // chart spanning 07:04:50-07:06:35, both under one range.
  function window_(r, ts) {
    var end = Date.now() / 1000, from = end - (SPAN[r] || 600);
    if (ts.length && ts[0] > from) { from = ts[0]; }
    return [from, Math.max(end, ts.length ? ts[ts.length - 1] : end)];
  }

  function empty(el, what) {
    if (el._u) { el._u.destroy(); el._u = null; }
    el.textContent = "No " + what + " in this range yet: the history keeps one row per GPU a minute.";
  }

  // utilization: GPUs busy and memory used over a range.
  function drawUtilization(box, r) {
    getJSON("/cluster/history?range=" + r, function (h) {
      if (box.dataset.range !== r) { return; }
      if (!h.points.length) { empty(box, "history"); return; }
      var data = [h.points.map(function (p) { return p.t; }), h.points.map(function (p) { return p.busy_gpus; }),
                  h.points.map(function (p) { return p.mem_mib ? 100 * p.mem_used_mib / p.mem_mib : 0; })];
      var span = window_(r, data[0]);
      plot(box, {
        height: 200, scales: { x: { time: true, range: function () { return span; } }, pct: { range: [0, 100] } },
        series: [{}, line("GPUs busy", 0), line("memory used %", 1, "pct")],
        axes: [timeAxis(), { label: "GPUs", size: 50 }, { side: 1, scale: "pct", label: "%", size: 50, grid: { show: false } }],
      }, data);
    });
  }

  // jobsByState: jobs queued, running and preempted over a range.
  function drawJobs(el, r) {
    getJSON("/cluster/history?range=" + r, function (h) {
      if (h.jobs.length < 2) {
        if (el._u) { el._u.destroy(); el._u = null; }
        el.textContent = "The job counts are recorded once a minute: the chart starts with the second.";
        return;
      }
      var data = [h.jobs.map(function (p) { return p.t; }), h.jobs.map(function (p) { return p.queued; }),
                  h.jobs.map(function (p) { return p.running; }), h.jobs.map(function (p) { return p.preempted; })];
      var span = window_(r, data[0]);
      plot(el, {
        height: 180,
        scales: { x: { time: true, range: function () { return span; } }, y: { range: function (u, lo, hi) { return [0, Math.max(1, hi * 1.1)]; } } },
        series: [{}, line("queued", 2), line("running", 0), line("preempted", 3)],
        axes: [timeAxis(), { label: "jobs", size: 50 }],
      }, data);
      el.dataset.points = h.jobs.length;
      el.dataset.span = span.map(Math.round).join(","); // for tests and curious people
    });
  }

  // wall draws one chart per GPU over a range: average and peak memory.
  function drawWall(box, r) {
    getJSON("/cluster/gpus/history?range=" + r, function (gs) {
      if (box.dataset.range !== r) { return; }
      box.querySelectorAll(".gpu-chart").forEach(function (c) { if (c._u) { c._u.destroy(); } });
      box.innerHTML = "";
      gs.forEach(function (g) {
        var c = document.createElement("div");
        c.className = "gpu-chart";
        c.dataset.gpu = g.node + "/" + g.index;
        box.appendChild(c);
        var cap = g.points.reduce(function (m, p) { return Math.max(m, p.mem_mib); }, 1);
        plot(c, {
          title: g.node + " · GPU " + g.index, height: 170, legend: { live: false },
          scales: { x: timeScale(), y: { range: [0, Math.max(1, cap / GB)] } },
          series: [{}, { label: "avg GB", stroke: "#2458d6", fill: "rgba(36,88,214,0.15)", width: 1.5, points: { show: false } },
                   { label: "peak GB", stroke: "#c53030", width: 1, points: { show: false } }],
          axes: [timeAxis(), { label: "GB", size: 50 }],
        }, [g.points.map(function (p) { return p.t; }), g.points.map(function (p) { return p.mem_used_avg_mib / GB; }),
            g.points.map(function (p) { return p.mem_used_max_mib / GB; })]);
        c.dataset.points = g.points.length;
      });
    });
  }

  // jobMemory draws the memory of a job's GPUs over a range, one line per GPU.
  function drawJobMemory(box, job, r) {
    getJSON("/jobs/" + job + "/memory?range=" + r, function (pts) {
      if (box.dataset.range !== r) { return; }
      if (!pts.length) { empty(box, "history of this job's GPUs"); return; }
      var keys = [], rows = {}, ts = [];
      pts.forEach(function (p) {
        var k = p.node + ":" + p.gpu;
        if (keys.indexOf(k) < 0) { keys.push(k); }
        if (!rows[p.t]) { rows[p.t] = {}; ts.push(p.t); }
        rows[p.t][k] = p.mem_mib / GB;
      });
      ts.sort(function (a, b) { return a - b; });
      var data = [ts].concat(keys.map(function (k) { return ts.map(function (t) { return rows[t][k] === undefined ? null : rows[t][k]; }); }));
      plot(box, {
        height: 220, scales: { x: timeScale(), y: { range: function (u, lo, hi) { return [0, Math.max(1, hi * 1.1)]; } } },
        series: [{}].concat(keys.map(function (k, i) { return line(k + " GB used", i); })),
        axes: [timeAxis(), { label: "GB", size: 50 }],
      }, data);
    });
  }

  // gpuDetail is the detail panel of one GPU: live over gpu:<uuid> for
  // 10 minutes, from the history for longer ranges.
  function gpuDetail(panel) {
    var chart = document.getElementById("gpu-detail-chart");
    var title = document.getElementById("gpu-detail-title");
    var uuid = null, stop = null, range = "10m", live = null;

    function drawPoints(pts) {
      var data = [pts.map(function (p) { return p.t; }), pts.map(function (p) { return p.used / GB; }),
                  pts.map(function (p) { return p.util; }), pts.map(function (p) { return p.power; }),
                  pts.map(function (p) { return p.temp; })];
      if (chart._u && chart._u.series.length === 5 && chart.dataset.mode === range) { chart._u.setData(data); return; }
      chart.dataset.mode = range;
      plot(chart, {
        height: 240, scales: { x: timeScale(), pct: { range: [0, 100] }, w: {}, c: {} },
        series: [{}, line("used GB", 0), line("utilization %", 1, "pct"), line("power W", 2, "w"), line("temperature °C", 3, "c")],
        axes: [timeAxis(), { label: "GB", size: 50 }, { side: 1, scale: "pct", label: "%", size: 50, grid: { show: false } }],
      }, data);
    }
    function fromLive(p) {
      return { t: p.t, used: p.mem_used_mib, util: p.util_pct, power: p.power_w || null, temp: p.temp_c || null };
    }
    function fromHistory(p) {
      return { t: p.t, used: p.mem_used_avg_mib, util: p.util_avg_pct,
               power: p.power_avg_w === undefined ? null : p.power_avg_w, temp: p.temp_avg_c === undefined ? null : p.temp_avg_c };
    }
    function show() {
      if (stop) { stop(); stop = null; }
      if (!uuid) { return; }
      if (range === "10m" && !stored) {
        live = [];
        stop = follow("gpu:" + uuid, function (type, d) {
          if (type === "snapshot") { live = []; }
          d.points.forEach(function (p) { live.push(fromLive(p)); });
          var cut = live.length && live[live.length - 1].t - 600;
          while (live.length && live[0].t < cut) { live.shift(); }
          drawPoints(live);
          chart.dataset.last = live.length ? live[live.length - 1].t : "";
        });
        return;
      }
      var want = range, id = uuid;
      getJSON("/cluster/gpus/" + encodeURIComponent(uuid) + "/history?range=" + range, function (h) {
        if (want !== range || id !== uuid) { return; }
        drawPoints(h.points.map(fromHistory));
      });
    }
    document.addEventListener("click", function (ev) {
      var b = ev.target.closest("[data-gpu-detail]");
      if (!b) { return; }
      uuid = b.dataset.gpuDetail;
      panel.dataset.uuid = uuid;
      title.textContent = b.dataset.gpuName || uuid;
      panel.hidden = false;
      chart.dataset.mode = "";
      show();
      panel.scrollIntoView({ behavior: "smooth", block: "start" });
    });
    document.getElementById("gpu-detail-close").addEventListener("click", function () {
      panel.hidden = true; uuid = null; show();
    });
    ranges("gpu-detail", function (r) { range = r; show(); });
  }

  // teamLive keeps a team page's standing and queue current.
  function teamLive(card) {
    var body = document.querySelector("#team-queue tbody");
    var none = document.getElementById("team-queue-empty");
    // The column names label each cell where the table shows as cards.
    var labels = Array.prototype.map.call(document.querySelectorAll("#team-queue thead th"),
      function (th) { return th.textContent; });
    // The card and the team's row of the shares table show the same
    // standing: both follow the topic (the row's figures are the same
    // fields, written as the server writes them).
    var row = document.querySelector('#shares tr[data-team="' + card.dataset.team + '"]');
    follow("team:" + card.dataset.team, function (type, d) {
      [card, row].forEach(function (box) {
        if (!box) { return; }
        box.querySelectorAll("[data-field]").forEach(function (el) {
          var v = d.team[el.dataset.field];
          if (typeof v === "number") {
            // With the digits the server writes (%.0f, %.3f), or GPUs as
            // it writes them: 3, 2.5, 0.33.
            v = el.dataset.digits ? v.toFixed(Number(el.dataset.digits)) : String(Math.round(v * 100) / 100);
          }
          if (v !== undefined) { el.textContent = v; }
        });
      });
      if (row) { row.dataset.updated = Date.now(); }
      if (!body) { return; }
      body.innerHTML = "";
      d.queue.forEach(function (j) {
        var tr = document.createElement("tr");
        var a = document.createElement("a");
        a.href = "/jobs/" + j.id;
        a.textContent = j.id + " " + (j.name || "");
        var state = document.createElement("span");
        state.className = "state state-" + j.state;
        state.textContent = j.state;
        // As the page writes the row: a session has no batch priority.
        var cells = [a, j.user || "", state, j.priority || "session", String(j.gpus), String(j.queue),
          String(Math.round(j.attained_service_gpu_s))];
        cells.forEach(function (c, i) {
          var td = document.createElement("td");
          td.dataset.label = labels[i] || "";
          if (i === 0) { td.className = "title"; }
          if (i >= 4) { td.className = "num"; }
          if (typeof c === "string") { td.textContent = c; } else { td.appendChild(c); }
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      if (none) { none.hidden = d.queue.length > 0; }
      var total = document.getElementById("team-queue-total");
      if (total) {
        // The first page of the team's jobs, and how many there are.
        total.hidden = d.queue_total <= d.queue.length;
        total.querySelector("[data-count=shown]").textContent = String(d.queue.length);
        total.querySelector("[data-count=total]").textContent = String(d.queue_total);
      }
      card.dataset.updated = Date.now();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var jobs = document.getElementById("jobs-by-state");
    if (document.getElementById("gpu-util")) {
      ranges("gpu-util", function (r) {
        var box = swap("gpu-util", r, "chart");
        if (stored || r !== "10m") { drawUtilization(box, r); }
        if (jobs) { drawJobs(jobs, r); }
      });
      if (jobs) {
        drawJobs(jobs, "10m");
        setInterval(function () {
          var on = document.querySelector('.ranges[data-chart="gpu-util"] button.on');
          drawJobs(jobs, on ? on.dataset.range : "10m");
        }, REFRESH);
      }
    }
    if (document.getElementById("gpu-wall")) {
      ranges("gpu-wall", function (r) {
        var box = swap("gpu-wall", r, "gpu-wall");
        if (stored || r !== "10m") { drawWall(box, r); }
      });
    }
    var mem = document.getElementById("job-memory");
    if (mem) {
      ranges("job-memory", function (r) {
        var box = swap("job-memory", r, "chart");
        if (stored || r !== "10m") { drawJobMemory(box, mem.dataset.job, r); }
      });
    }
    var detail = document.getElementById("gpu-detail");
    if (detail) { gpuDetail(detail); }
    var team = document.getElementById("team-now");
    if (team && team.dataset.team) { teamLive(team); }
  });
})();
