// Live GPU memory charts, drawn with uPlot from the /ws/gpus stream.
// A GPU wall (one chart per GPU) where an element #gpu-wall exists, and a
// job's memory per GPU where an element #job-memory[data-job] exists.
(function () {
  "use strict";
  var WINDOW = 600; // seconds kept on screen
  var GB = 1024;

  var live = window.gpuportalLive, stream = live.follow, width = live.width, timeAxis = live.timeAxis, timeScale = live.timeScale;

  function trim(data) {
    var cut = 0, last = data[0][data[0].length - 1];
    while (cut < data[0].length && data[0][cut] < last - WINDOW) { cut++; }
    if (cut > 0) { for (var i = 0; i < data.length; i++) { data[i].splice(0, cut); } }
  }

  // utilization draws, over time, how many GPUs are busy (jobs placed on
  // them: p.held, the rule of the cluster page and /metrics) and the share
  // of GPU memory in use, from the same samples as the wall.
  // The first frame brings the cluster's sums each second, as the server
  // computes them for GET /cluster/history (total); the updates bring
  // readings, summed here per second. A second's bucket holds each GPU's
  // latest reading in it, by GPU: a reading sent twice (in the first
  // frame, then an update) or two readings of one GPU in one second count
  // that GPU once, and a second the first frame summed is not counted again.
  function utilization(el) {
    var buckets = {}, totals = {}, u = null; // unix second -> {"node/index": {busy, used, total}}; -> {busy, used, total}
    function add(t, gpu, p) {
      if (totals[t]) { return; }
      var b = buckets[t] || (buckets[t] = {});
      b[gpu] = { busy: (p.held || []).length > 0, used: p.mem_used_mib, total: p.mem_mib };
    }
    function total(p) { totals[p.t] = { busy: p.busy_gpus, used: p.mem_used_mib, total: p.mem_mib }; delete buckets[p.t]; }
    function reset() { buckets = {}; totals = {}; }
    function sum(b) {
      var out = { busy: 0, used: 0, total: 0 };
      Object.keys(b).forEach(function (k) {
        if (b[k].busy) { out.busy++; }
        out.used += b[k].used; out.total += b[k].total;
      });
      return out;
    }
    function draw() {
      var ts = Object.keys(buckets).concat(Object.keys(totals)).map(Number).sort(function (a, b) { return a - b; });
      var last = ts.length ? ts[ts.length - 1] : 0;
      ts.forEach(function (t) { if (t < last - WINDOW) { delete buckets[t]; delete totals[t]; } });
      ts = ts.filter(function (t) { return t >= last - WINDOW; });
      var sums = ts.map(function (t) { return totals[t] || sum(buckets[t]); });
      // The newest second may still be coming in, machine by machine: it
      // is drawn once it holds as many GPUs as the second before (by their
      // memory), or the next second has begun. Drawn at once, it dipped at
      // the right edge (8 GPUs busy, then 4 for the newest second).
      var n = ts.length;
      if (n >= 2 && !totals[ts[n - 1]] && sums[n - 1].total < sums[n - 2].total) {
        ts = ts.slice(0, n - 1);
        sums = sums.slice(0, n - 1);
      }
      var data = [ts, sums.map(function (b) { return b.busy; }),
                  sums.map(function (b) { return b.total ? 100 * b.used / b.total : 0; })];
      // The most GPUs drawn busy at once, and what is drawn, for tests and
      // curious people.
      el.dataset.maxBusy = sums.reduce(function (m, b) { return Math.max(m, b.busy); }, 0);
      el.drawn = data;
      if (!u) {
        u = new uPlot({
          width: width(el), height: 200, scales: { x: timeScale(), pct: { range: [0, 100] } },
          series: [{}, { label: "GPUs busy", stroke: "#2458d6", width: 1.5, points: { show: false } },
                   { label: "memory used %", stroke: "#1e8a4c", width: 1.5, scale: "pct", points: { show: false } }],
          axes: [timeAxis(), { label: "GPUs", size: 50 }, { side: 1, scale: "pct", label: "%", size: 50, grid: { show: false } }],
        }, data, el);
      } else { u.setData(data); }
    }
    return { add: add, total: total, reset: reset, draw: draw };
  }

  // Salus lanes drawn on a GPU's memory timeline: a band for the jobs'
  // persistent memory from 0, then one band per lane stacked above it, as
  // large as the lane; the lane whose job runs an iteration now is drawn
  // stronger. The used-memory line rises into a lane while its iteration
  // runs. c.lanes is the GPU's lanes from the gpus topic.
  var LANE_COLORS = ["#b7791f", "#6b46c1", "#2c7a7b", "#d53f8c", "#c53030", "#4a5568"];
  function lanesPlugin(c) {
    function band(u, ctx, lo, hi, fill, stroke, label) {
      var y0 = u.valToPos(lo / GB, "y", true), y1 = u.valToPos(hi / GB, "y", true);
      var b = u.bbox;
      ctx.fillStyle = fill;
      ctx.fillRect(b.left, y1, b.width, y0 - y1);
      ctx.strokeStyle = stroke;
      ctx.setLineDash([3, 3]);
      ctx.strokeRect(b.left, y1, b.width, y0 - y1);
      ctx.setLineDash([]);
      if (y0 - y1 >= 10 * devicePixelRatio) {
        ctx.fillStyle = stroke;
        ctx.font = (10 * devicePixelRatio) + "px sans-serif";
        ctx.textBaseline = "top";
        ctx.textAlign = "left";
        ctx.fillText(label, b.left + 4 * devicePixelRatio, y1 + 2 * devicePixelRatio);
      }
    }
    return { hooks: { drawAxes: [function (u) {
      var g = c.lanes;
      if (!g || !g.lanes || !g.lanes.length) { return; }
      var ctx = u.ctx;
      ctx.save();
      var ids = [];
      g.lanes.forEach(function (l) { l.jobs.forEach(function (j) { ids.push(j.job_id); }); });
      band(u, ctx, 0, g.persistent_mib, "rgba(138,148,160,0.18)", "#5a6470", "persistent · jobs " + ids.join(", "));
      var base = g.persistent_mib;
      g.lanes.forEach(function (l, i) {
        var col = LANE_COLORS[i % LANE_COLORS.length];
        var label = "lane " + l.id + " · jobs " + l.jobs.map(function (j) { return j.job_id; }).join(", ") +
          (l.running ? " · job " + l.running + " runs" : "");
        band(u, ctx, base, base + l.size_mib, l.running ? hexAlpha(col, 0.22) : hexAlpha(col, 0.08), col, label);
        base += l.size_mib;
      });
      ctx.restore();
    }] } };
  }
  function hexAlpha(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }
  function setLanes(c, lanes) {
    c.lanes = lanes && lanes.lanes && lanes.lanes.length ? lanes : null;
    c.box.dataset.lanes = c.lanes ? c.lanes.lanes.length : 0; // for tests and curious people
    c.u.redraw(false);
  }

  function gpuWall(wall) {
    var charts = {}; // "node/index" -> {u, data}
    var utilEl = document.getElementById("gpu-util");
    var util = utilEl ? utilization(utilEl) : null;

    // seen says which charts are in view (IntersectionObserver): at 1,000
    // GPUs, drawing every chart each second is most of the page's work.
    var seen = window.IntersectionObserver ? new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        var c = charts[e.target.dataset.gpu];
        if (!c) { return; }
        c.inView = e.isIntersecting;
        if (c.inView && c.stale) { draw(c); }
      });
    }, { rootMargin: "200px" }) : null;

    // draw draws c's readings; box.dataset.drawn is the newest drawn, for
    // tests and curious people.
    function draw(c) {
      c.stale = false;
      c.u.setData(c.data);
      var n = c.data[0].length;
      if (n) { c.box.dataset.drawn = c.data[0][n - 1]; }
    }

    function chartFor(node, index, memMiB) {
      var key = node + "/" + index;
      if (charts[key]) { return charts[key]; }
      var box = document.createElement("div");
      box.className = "gpu-chart";
      box.dataset.gpu = key;
      wall.appendChild(box);
      var data = [[], [], []];
      var c = { data: data, box: box, lanes: null, inView: !seen, stale: false };
      if (seen) { seen.observe(box); }
      var u = new uPlot({
        title: node + " · GPU " + index, width: width(box), height: 170,
        plugins: [lanesPlugin(c)],
        scales: { x: timeScale(), y: { range: [0, Math.max(1, memMiB / GB)] } },
        series: [{}, { label: "used GB", stroke: "#2458d6", fill: "rgba(36,88,214,0.15)", width: 1.5, points: { show: false } },
                 { label: "capacity GB", stroke: "#8a94a0", dash: [4, 4], width: 1, points: { show: false } }],
        axes: [timeAxis(), { label: "GB", size: 50 }],
        legend: { live: false },
      }, data, box);
      c.u = u;
      charts[key] = c;
      return c;
    }

    // add draws a reading after those drawn; one already drawn (the first
    // frame's last, sent again in an update) is not drawn twice.
    function add(node, index, p) {
      var c = chartFor(node, index, p.mem_mib), n = c.data[0].length;
      var jobs = (p.held || []).map(function (id) { return "job " + id; }).join(", ");
      c.box.title = jobs ? "running: " + jobs : "idle";
      if (n && p.t <= c.data[0][n - 1]) { return; }
      c.data[0].push(p.t); c.data[1].push(p.mem_used_mib / GB); c.data[2].push(p.mem_mib / GB);
      c.box.dataset.last = p.t; // the newest sample drawn, for tests and curious people
    }

    // drawWindow draws a GPU of the first frame: the most memory used in each
    // step (null: no reading, a gap), up to its newest reading, then that
    // reading, after which come the updates' seconds.
    function drawWindow(f, g) {
      var last = g.last, cap = last ? last.mem_mib : (g.lanes ? g.lanes.capacity_mib : 1);
      var c = chartFor(g.node, g.index, cap), started = false;
      if (g.lanes) { setLanes(c, g.lanes); }
      (g.used_max_mib || []).forEach(function (v, i) {
        var t = f.from + i * f.step_s;
        if ((v === null && !started) || (last && t >= last.t)) { return; }
        started = true;
        c.data[0].push(t); c.data[1].push(v === null ? null : v / GB); c.data[2].push(v === null ? null : cap / GB);
      });
      if (last) { add(g.node, g.index, last); }
    }

    stream(["gpus"], function (topic, type, data) {
      if (type === "lanes") {
        var seen = {};
        (data || []).forEach(function (g) {
          var c = charts[g.node + "/" + g.index];
          if (c) { setLanes(c, g.lanes); seen[g.node + "/" + g.index] = true; }
        });
        Object.keys(charts).forEach(function (k) { if (!seen[k] && charts[k].lanes) { setLanes(charts[k], null); } });
        return;
      }
      if (type === "snapshot") {
        // The first frame: every GPU's window in steps, the cluster's
        // figures each second (api.GPUWall). The cluster's newest second
        // is summed from the GPUs' newest readings and the updates, as
        // machines that report after the frame was read complete it.
        if (seen) { seen.disconnect(); }
        wall.innerHTML = ""; charts = {};
        var newest = 0;
        (data.gpus || []).forEach(function (g) { drawWindow(data, g); if (g.last) { newest = Math.max(newest, g.last.t); } });
        Object.keys(charts).forEach(function (k) { draw(charts[k]); });
        if (util) {
          util.reset();
          (data.cluster || []).forEach(function (p) { if (p.t < newest) { util.total(p); } });
          (data.gpus || []).forEach(function (g) { if (g.last) { util.add(g.last.t, g.node + "/" + g.index, g.last); } });
          util.draw();
        }
        return;
      }
      // An update: the newest reading of each GPU that read, by machine
      // (api.GPUsUpdate): [index, memory used, memory, jobs placed...].
      (data.nodes || []).forEach(function (n) {
        n.gpus.forEach(function (r) {
          var p = { t: n.t, mem_used_mib: r[1], mem_mib: r[2], held: r.slice(3) };
          add(n.node, r[0], p);
          if (util) { util.add(p.t, n.node + "/" + r[0], p); }
        });
      });
      if (util) { util.draw(); }
      // Only the charts in view are drawn again; one scrolled into view
      // is drawn then.
      Object.keys(charts).forEach(function (k) {
        var c = charts[k];
        trim(c.data);
        if (c.inView) { draw(c); } else { c.stale = true; }
      });
    });
  }

  function jobMemory(el) {
    var job = Number(el.dataset.job);
    var keys = [], data = [[]], u = null;

    function seriesIndex(key) {
      var i = keys.indexOf(key);
      if (i >= 0) { return i + 1; }
      keys.push(key);
      data.push(data[0].map(function () { return null; }));
      if (u) { u.addSeries({ label: key + " GB", stroke: color(keys.length - 1), width: 1.5, points: { show: false } }, keys.length); }
      return keys.length;
    }
    function color(i) { return ["#2458d6", "#1e8a4c", "#b7791f", "#c53030", "#6b46c1", "#2c7a7b", "#d53f8c", "#4a5568"][i % 8]; }

    function add(t, key, mib) {
      if (data[0].length && t < data[0][data[0].length - 1]) { return; } // already drawn
      var s = seriesIndex(key);
      var row = data[0].length - 1;
      if (row < 0 || data[0][row] !== t) {
        data[0].push(t);
        for (var i = 1; i < data.length; i++) { data[i].push(null); }
        row++;
      }
      data[s][row] = mib / GB;
    }

    function draw() {
      if (el.hidden) {
        // A job that had not run when the page was drawn: its chart
        // appears with its first reading.
        if (!data[0].length) { return; }
        el.hidden = false;
        var none = document.getElementById("job-memory-none");
        if (none) { none.hidden = true; }
      }
      if (!u) {
        u = new uPlot({
          width: width(el), height: 220,
          scales: { x: timeScale(), y: { range: function (u, lo, hi) { return [0, Math.max(1, hi * 1.1)]; } } },
          series: [{}].concat(keys.map(function (k, i) { return { label: k + " GB", stroke: color(i), width: 1.5, points: { show: false } }; })),
          axes: [timeAxis(), { label: "GB", size: 50 }],
        }, data, el);
        return;
      }
      trim(data);
      u.setData(data);
    }

    stream(["job:" + job], function (topic, type, data) {
      (data.memory || []).forEach(function (p) { add(p.t, p.node + ":" + p.gpu, p.mem_mib); });
      draw();
    });
  }

  // jctCDF draws the CDF of recent JCTs embedded in the page.
  function jctCDF(el) {
    var pts = JSON.parse(el.dataset.cdf || "null") || [];
    if (!pts.length) { el.textContent = "No job has finished in this window yet."; return; }
    var data = [pts.map(function (p) { return p[0]; }), pts.map(function (p) { return p[1]; })];
    new uPlot({
      width: width(el), height: 240,
      scales: { x: { time: false, distr: 3 }, y: { range: [0, 1] } },
      series: [{ label: "JCT s" }, { label: "fraction of jobs", stroke: "#2458d6", width: 1.5, points: { show: pts.length < 30 } }],
      axes: [{ label: "JCT (seconds, log scale)", space: 60 }, { label: "fraction", size: 50 }],
    }, data, el);
  }

  // whatIfCDF draws the what-if page's JCT CDFs, one line per row (what
  // actually happened, then each policy replayed) over one log-scale grid.
  var WHATIF_COLORS = ["#1d232b", "#2458d6", "#1e8a4c", "#b7791f", "#c53030", "#6b46c1", "#2c7a7b", "#d53f8c", "#4a5568"];
  function whatIfCDF(el) {
    var c = JSON.parse(el.dataset.cdf || "null") || {};
    if (!c.x || !c.x.length) { el.textContent = "No job finished in this window."; return; }
    var series = [{ label: "JCT s" }].concat((c.labels || []).map(function (name, i) {
      return { label: name, stroke: WHATIF_COLORS[i % WHATIF_COLORS.length], width: i === 0 ? 2.5 : 1.5,
               dash: i === 0 ? [6, 4] : undefined, points: { show: false } };
    }));
    new uPlot({
      width: width(el), height: 280,
      scales: { x: { time: false, distr: 3 }, y: { range: [0, 1] } },
      series: series,
      axes: [{ label: "JCT (seconds, log scale)", space: 60 }, { label: "fraction of jobs", size: 50 }],
    }, [c.x].concat(c.y), el);
  }

  // teamUsage draws a team's GPUs in use against its guarantee.
  function teamUsage(el) {
    var s = JSON.parse(el.dataset.samples || "null") || [];
    if (s.length < 2) { el.textContent = "The scheduler records one sample a minute: the chart starts with the second."; return; }
    var data = [s.map(function (r) { return r[0]; }), s.map(function (r) { return r[1]; }),
                s.map(function (r) { return r[2]; }), s.map(function (r) { return r[3]; })];
    new uPlot({
      width: width(el), height: 240, scales: { x: timeScale() },
      series: [{}, { label: "in use", stroke: "#2458d6", fill: "rgba(36,88,214,0.12)", width: 1.5, points: { show: false } },
               { label: "borrowed", stroke: "#b7791f", width: 1.5, points: { show: false } },
               { label: "guaranteed", stroke: "#8a94a0", dash: [4, 4], width: 1, points: { show: false } }],
      axes: [timeAxis(), { label: "GPUs", size: 50 }],
    }, data, el);
  }

  // jobProfile draws a job's CPU sensitivity (speed against cores per
  // GPU) with its allocation as a dashed vertical line.
  function jobProfile(el) {
    var p = JSON.parse(el.dataset.profile || "{}");
    var pts = (p.cpu || []).slice();
    if (!pts.length) { el.textContent = "The job's speed does not depend on its CPUs."; return; }
    var last = pts[pts.length - 1];
    var xmax = Math.max(last[0], p.alloc || 0) * 1.15 || 1;
    if (last[0] < xmax) { pts.push([xmax, last[1]]); }
    var data = [pts.map(function (q) { return q[0]; }), pts.map(function (q) { return q[1]; })];
    new uPlot({
      width: width(el), height: 220,
      scales: { x: { time: false }, y: { range: [0, 1.05] } },
      series: [{ label: "cores per GPU" }, { label: "speed", stroke: "#2458d6", width: 1.5 }],
      axes: [{ label: "cores per GPU" }, { label: "speed (1 = best)", size: 50 }],
      hooks: { draw: [function (u) {
        if (!p.alloc) { return; }
        var x = Math.round(u.valToPos(p.alloc, "x", true)), ctx = u.ctx;
        ctx.save();
        ctx.strokeStyle = "#b7791f"; ctx.lineWidth = 1.5; ctx.setLineDash([5, 4]);
        ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
        ctx.restore();
      }] },
    }, data, el);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var prof = document.getElementById("job-profile");
    if (prof) { jobProfile(prof); }
    var tu = document.getElementById("team-usage");
    if (tu) { teamUsage(tu); }
    var cdf = document.getElementById("jct-cdf");
    if (cdf) { jctCDF(cdf); }
    var wi = document.getElementById("whatif-cdf");
    if (wi) { whatIfCDF(wi); }
    var wall = document.getElementById("gpu-wall");
    if (wall) { gpuWall(wall); }
    var mem = document.getElementById("job-memory");
    if (mem) { jobMemory(mem); }
  });
})();
