// Small helpers for the portal's pages. htmx does the partial updates.
document.addEventListener("htmx:configRequest", function (ev) {
  var meta = document.querySelector('meta[name="csrf-token"]');
  if (meta) { ev.detail.headers["X-CSRF-Token"] = meta.content; }
});
