// Small helpers for the portal's pages. htmx does the partial updates.
document.addEventListener("htmx:configRequest", function (ev) {
  var meta = document.querySelector('meta[name="csrf-token"]');
  if (meta) { ev.detail.headers["X-CSRF-Token"] = meta.content; }
});

// A form with data-confirm asks before it acts: cancelling a job,
// draining or cordoning a machine, revoking a token.
document.addEventListener("submit", function (ev) {
  var question = ev.target.getAttribute("data-confirm");
  if (question && !window.confirm(question)) { ev.preventDefault(); }
});

// A job's output (#job-log) opens at its end, as tail -f shows it, and
// keeps the reader's place when the job's facts are refreshed (htmx
// replaces the whole block every 2 s): at the end, it follows the new
// lines; scrolled up, it stays where it was. Before, every refresh put
// it back at the top, at the oldest lines shown. The place is put back
// as soon as htmx has swapped (htmx:afterSwap), not once the new content
// has settled (htmx.onLoad, some 20 ms later on an idle machine and more
// on a busy one): until then the reader saw the top, and a place taken
// by a swap of another part of the page was put back on the next swap.
var jobLogPlace = null;
document.addEventListener("htmx:beforeSwap", function () {
  var e = document.getElementById("job-log");
  jobLogPlace = e ? { end: e.scrollHeight - e.clientHeight - e.scrollTop < 8, top: e.scrollTop } : null;
});
function placeJobLog() {
  var e = document.getElementById("job-log");
  if (e) { e.scrollTop = jobLogPlace && !jobLogPlace.end ? jobLogPlace.top : e.scrollHeight; }
  jobLogPlace = null;
}
document.addEventListener("htmx:afterSwap", placeJobLog);
document.addEventListener("DOMContentLoaded", placeJobLog);
