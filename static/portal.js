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
