// The live stream (/ws) as the pages follow it, shared by charts.js and
// history.js: one subscription per call, reconnecting with backoff and
// subscribing again after every reconnect.
(function () {
  "use strict";

  function socketURL(path) {
    return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
  }

  // follow subscribes to topics and calls handler(topic, type, data) for
  // each message ("snapshot" first, then "update"); it returns a function
  // that stops following.
  function follow(topics, handler) {
    var delay = 1000, ws = null, stopped = false;
    function connect() {
      ws = new WebSocket(socketURL("/ws?topics=" + encodeURIComponent(topics.join(","))));
      ws.onopen = function () { delay = 1000; };
      ws.onmessage = function (ev) {
        var m = JSON.parse(ev.data);
        if (m.type === "error") { console.warn("gpuportal stream:", m.topic, m.error); return; }
        handler(m.topic, m.type, m.data);
      };
      ws.onclose = function () {
        if (stopped) { return; }
        setTimeout(connect, delay);
        delay = Math.min(delay * 2, 30000);
      };
    }
    connect();
    return function () { stopped = true; if (ws) { ws.close(); } };
  }

  // width is the width a chart in el may take.
  function width(el) { return Math.max(260, el.clientWidth - 8); }

  function pad(n) { return n < 10 ? "0" + n : String(n); }

  // timeAxis is the x axis of a chart over time: one row of labels
  // (14:05:30, 14:05 or 11/24 14:05, by the span shown) spaced so that
  // they never overlap, on a phone as on a laptop.
  function timeAxis() {
    return {
      space: function (u, i, min, max) { return max - min > 36 * 3600 ? 100 : 80; },
      values: function (u, splits) {
        var min = u.scales.x.min, max = u.scales.x.max, span = max - min;
        var plot = u.bbox.width / devicePixelRatio; // css px, 0 before the first layout
        // The labels' finest unit: a second up to 15 minutes shown, else
        // a minute. Over a few seconds (a job just started) uPlot puts
        // ticks half a second apart, and each second was labelled twice.
        var unit = span <= 15 * 60 ? 1 : 60;
        return splits.map(function (t) {
          // A label centred on a tick at the right edge would be cut in half.
          if (plot > 0 && (max - t) / span * plot < 30) { return ""; }
          if (Math.abs(t - Math.round(t / unit) * unit) > 1e-6) { return ""; }
          var d = new Date(t * 1000), hm = pad(d.getHours()) + ":" + pad(d.getMinutes());
          if (span <= 15 * 60) { return hm + ":" + pad(d.getSeconds()); }
          if (span <= 36 * 3600) { return hm; }
          return (d.getMonth() + 1) + "/" + d.getDate() + " " + hm;
        });
      },
    };
  }

  // timeScale is the x scale of a chart over time. Readings of one
  // second alone (a job that ran a second) leave uPlot no span, which it
  // widens by a day's milliseconds, in seconds here: an axis of years.
  // A minute around them is shown instead.
  function timeScale() {
    return {
      time: true,
      range: function (u, min, max) {
        var xs = u.data && u.data[0];
        if (xs && xs.length && xs[0] === xs[xs.length - 1]) { return [xs[0] - 30, xs[0] + 30]; }
        return [min, max];
      },
    };
  }

  window.gpuportalLive = { follow: follow, width: width, timeAxis: timeAxis, timeScale: timeScale };
})();
