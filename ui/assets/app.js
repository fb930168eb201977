// acpflow ui: live updates and the cancel button. No framework: the server
// renders every page; this script only fetches the page again when the
// store changes (server-sent events) and swaps in the parts marked
// data-live, keeping their ids. Text arrives escaped by the server's
// templates, and parsed with DOMParser no script in it ever runs.
"use strict";
(function () {
  var status = document.getElementById("live-status");
  var busy = false, again = false;

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { headers: { "X-Acpflow-Live": "1" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh && fresh.innerHTML !== el.innerHTML) {
            el.replaceWith(document.importNode(fresh, true));
          }
        });
        document.body.dataset.refreshed = String(Date.now());
        wire();
        follow();
        tick();
      })
      .catch(function () {})
      .finally(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  function wire() {
    var c = document.getElementById("cancel");
    if (c && !c.dataset.wired) {
      c.dataset.wired = "1";
      c.addEventListener("click", function () {
        var out = document.getElementById("cancel-result");
        c.disabled = true;
        fetch("/api/runs/" + encodeURIComponent(c.dataset.run) + "/cancel", { method: "POST", credentials: "same-origin" })
          .then(function (r) { return r.json(); })
          .then(function (j) { out.textContent = j.message || j.error || ""; })
          .catch(function (e) { out.textContent = String(e); c.disabled = false; });
      });
    }
    document.querySelectorAll("button.approve").forEach(function (b) {
      if (b.dataset.wired) return;
      b.dataset.wired = "1";
      b.addEventListener("click", function () { answer(b); });
    });
    document.querySelectorAll(".copy-button").forEach(function (b) {
      if (b.dataset.wired) return;
      b.dataset.wired = "1";
      b.addEventListener("click", function () {
        var code = b.previousElementSibling;
        if (navigator.clipboard && code) navigator.clipboard.writeText(code.textContent);
      });
    });
  }

  // elapsedText words milliseconds as the server does (Go's Duration, to
  // the second): 0s, 42s, 3m5s, 1h0m12s.
  function elapsedText(ms) {
    var s = Math.max(0, Math.floor(ms / 1000)), h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60);
    s = s % 60;
    if (h) return h + "h" + m + "m" + s + "s";
    if (m) return m + "m" + s + "s";
    return s + "s";
  }

  // tick brings every running clock (an element with data-since, the
  // start of a step or element still running) to now: between changes of
  // the store the page is not fetched again, and the time goes on.
  function tick() {
    document.querySelectorAll(".elapsed[data-since]").forEach(function (el) {
      var t = Date.parse(el.dataset.since);
      if (!isNaN(t)) el.textContent = elapsedText(Date.now() - t);
    });
  }

  // follow keeps the output of a running step scrolled to its newest line.
  function follow() {
    document.querySelectorAll(".live-output").forEach(function (p) { p.scrollTop = p.scrollHeight; });
  }

  // answer sends a pending approval's answer (allow, reject, allow for the
  // rest of the run); the list drops it once the store says so.
  function answer(b) {
    var p = b.parentElement, out = p.querySelector(".approve-result");
    p.querySelectorAll("button.approve").forEach(function (x) { x.disabled = true; });
    fetch("/api/approvals/" + encodeURIComponent(b.dataset.approval), {
      method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ decision: b.dataset.decision, "for": b.dataset.for || "" })
    })
      .then(function (r) { return r.json(); })
      .then(function (j) { if (out) out.textContent = j.message || j.error || ""; })
      .catch(function (e) {
        if (out) out.textContent = String(e);
        p.querySelectorAll("button.approve").forEach(function (x) { x.disabled = false; });
      });
  }

  document.addEventListener("DOMContentLoaded", function () {
    wire();
    follow();
    tick();
    setInterval(tick, 1000);
    if (!window.EventSource || !document.querySelector("[data-live]")) return;
    var es = new EventSource("/events");
    es.addEventListener("hello", function () { if (status) status.className = "live on"; });
    es.addEventListener("change", refresh);
    es.onerror = function () { if (status) status.className = "live off"; };
  });
})();
