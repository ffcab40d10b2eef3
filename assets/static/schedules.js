// schedules.js: the Schedules pages' bits of script, on top of app.js. The pages work
// without it: the form has a Preview button and a "Use this report" button, the time
// zone is UTC until changed, and Delete asks on a page of its own.
(function () {
  "use strict";

  // formBody is the form's values for the preview, without the button pressed.
  function formBody(form) {
    var q = new URLSearchParams();
    new FormData(form).forEach(function (v, k) {
      if (k !== "action" && typeof v === "string") q.append(k, v);
    });
    return q;
  }

  // watchPreview fetches the next runs again (POST /schedules/preview, an HTML
  // fragment) when a value changes, at most once per pause in typing; an answer that
  // arrives after a newer request was sent is dropped.
  function watchPreview(form) {
    var box = form.querySelector("[data-preview-url]");
    if (!box || !window.fetch || !window.URLSearchParams || !window.FormData) return;
    var url = box.getAttribute("data-preview-url");
    var timer = null, seq = 0, last = null;
    var refresh = function () {
      var body = formBody(form).toString();
      if (body === last) return;
      last = body;
      var mine = ++seq;
      box.setAttribute("aria-busy", "true");
      fetch(url, { method: "POST", body: body, credentials: "same-origin",
        headers: { "Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html" } })
        .then(function (res) { return res.ok ? res.text() : null; })
        .then(function (html) {
          if (mine !== seq) return;
          box.removeAttribute("aria-busy");
          if (html == null) { last = null; return; }
          box.innerHTML = html;
          box.setAttribute("data-seq", String(mine));
        })
        .catch(function () {
          if (mine !== seq) return;
          box.removeAttribute("aria-busy");
          last = null;
        });
    };
    var later = function (e) {
      if (e && e.target && e.target.name === "report") return;
      clearTimeout(timer);
      timer = setTimeout(refresh, 250);
    };
    form.addEventListener("input", later);
    form.addEventListener("change", later);
    return refresh;
  }

  function setupForm(form) {
    // A form drawn in answer to a post (another report, a preview) is at the address it
    // posted to, /schedules, the list's: the location bar gets the form's own back.
    var own = form.getAttribute("data-url");
    if (own && window.history && history.replaceState && window.URL) {
      var u = new URL(own, location.href);
      if (u.pathname !== location.pathname) history.replaceState(null, "", u.pathname + u.search);
    }
    // Another report: draw its parameters (the server's form, values kept).
    var report = form.querySelector("select[name=report]");
    var apply = form.querySelector("button[name=action][value=report]");
    if (report && apply && form.requestSubmit) {
      report.addEventListener("change", function () { form.requestSubmit(apply); });
    }
    var refresh = watchPreview(form);
    var cron = form.querySelector("input[name=cron]");
    form.querySelectorAll("[data-cron]").forEach(function (b) {
      b.hidden = false;
      b.addEventListener("click", function () {
        if (!cron) return;
        cron.value = b.getAttribute("data-cron");
        cron.dispatchEvent(new Event("input", { bubbles: true }));
      });
    });
    // A new schedule runs in the viewer's zone unless another is chosen.
    var zone = form.querySelector("input[name=timezone]");
    if (form.getAttribute("data-fresh") === "true" && zone && zone.value === "UTC" && window.Intl) {
      var tz = "";
      try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (err) { tz = ""; }
      if (tz && tz !== "UTC" && tz !== "Etc/UTC") {
        zone.value = tz;
        if (refresh) refresh();
      }
    }
  }

  // Delete asks here, and the server's confirm page is skipped.
  function setupConfirm(form) {
    form.addEventListener("submit", function (e) {
      if (!window.confirm(form.getAttribute("data-confirm"))) { e.preventDefault(); return; }
      if (!form.querySelector("input[name=confirm]")) {
        var c = document.createElement("input");
        c.type = "hidden"; c.name = "confirm"; c.value = "yes";
        form.appendChild(c);
      }
    });
  }

  function start() {
    document.querySelectorAll("form[data-testid=schedule-form]").forEach(setupForm);
    document.querySelectorAll("form[data-confirm]").forEach(setupConfirm);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
