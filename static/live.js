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

  window.gpuportalLive = { follow: follow, width: width };
})();
