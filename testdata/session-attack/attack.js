// What a session's page (a user's web app, or a notebook's output) tries
// against the person who opens it, if it could act on the portal's
// origin: read an admin page and its CSRF token, create an admin with it
// or blindly, install a service worker over the portal, plant cookies.
// It returns what each attempt came to.
async function attack(portal) {
  const r = {origin: String(self.origin)}; // "null" when sandboxed
  try {
    const res = await fetch(portal + "/admin", {credentials: "include"});
    const text = await res.text();
    const m = text.match(/name="_csrf" value="([^"]+)"/);
    r.read = "read " + res.status + (m ? " with a CSRF token" : "");
    if (m) {
      const form = new URLSearchParams({_csrf: m[1], name: "mallory", password: "mallory-password-1", role: "admin", team: ""});
      const p = await fetch(portal + "/admin/create-user", {method: "POST", credentials: "include", body: form});
      r.post = "posted " + p.status;
    }
  } catch (e) {
    r.read = "blocked " + e.name;
  }
  try {
    const form = new URLSearchParams({name: "mallory2", password: "mallory-password-1", role: "admin", team: ""});
    await fetch(portal + "/admin/create-user", {method: "POST", mode: "no-cors", credentials: "include", body: form});
    r.blind = "sent";
  } catch (e) {
    r.blind = "blocked " + e.name;
  }
  try {
    const reg = await navigator.serviceWorker.register("sw.js", {scope: "/"});
    r.worker = "registered for " + reg.scope;
  } catch (e) {
    r.worker = "refused " + e.name;
  }
  try {
    document.cookie = "planted=1; path=/";
    document.cookie = "gpuportal_session=planted; path=/; domain=localhost";
    document.cookie = "gpuportal_csrf=" + "a".repeat(64) + "; path=/";
    r.cookie = "written";
  } catch (e) {
    r.cookie = "refused " + e.name;
  }
  return r;
}
