// forms.js: the New export form's estimate, and the Queue page's running clocks, on top
// of app.js. The pages work without it: the form shows the estimate of the values it
// was drawn with, and the Queue page its figures as of the last load.
(function () {
  "use strict";

  // ---- the New export form's estimate ----

  // When a value changes, the estimate is fetched again for the form's values
  // (GET /exports/new/estimate, an HTML fragment), at most once per pause in typing; an
  // answer that arrives after a newer request was sent is dropped.
  // formQuery is a form's values as a query string, without its idempotency key.
  function formQuery(form) {
    var q = new URLSearchParams();
    new FormData(form).forEach(function (v, k) {
      if (k !== "idempotency_key" && typeof v === "string") q.append(k, v);
    });
    return q.toString();
  }

  function watchEstimate() {
    var box = document.querySelector("[data-estimate-url]");
    if (!box) return;
    var form = box.closest("form");
    if (!form || !window.fetch || !window.URLSearchParams) return;
    var url = box.getAttribute("data-estimate-url");
    var timer = null, seq = 0, last = null;
    var refresh = function () {
      var query = formQuery(form);
      if (query === last) return;
      last = query;
      var mine = ++seq;
      box.setAttribute("aria-busy", "true");
      fetch(url + "?" + query, { headers: { "Accept": "text/html" }, credentials: "same-origin" })
        .then(function (res) { return res.ok ? res.text() : null; })
        .then(function (html) {
          if (mine !== seq) return;
          box.removeAttribute("aria-busy");
          if (html == null) { last = null; return; }
          box.innerHTML = html;
        })
        .catch(function () {
          if (mine !== seq) return;
          box.removeAttribute("aria-busy");
          last = null;
        });
    };
    var later = function () {
      clearTimeout(timer);
      timer = setTimeout(refresh, 300);
    };
    form.addEventListener("input", later);
    form.addEventListener("change", later);
    last = formQuery(form); // the estimate drawn with the page is for these
  }

  // ---- the Queue page's running clocks ----

  // "Running for" and "Waiting for" count on from what the server said when it drew
  // them (data-elapsed-ms), by this browser's own clock since then, so a clock skew
  // between the two does not matter. The page's refresh (app.js) brings new figures.
  function human(ms) {
    // The same words and rounding as ui.Duration, so the server's text and the count
    // that follows it agree.
    var s = Math.max(0, Math.floor(ms / 1000));
    if (ms < 1000) return Math.max(0, Math.round(ms)) + " ms";
    if (ms < 60000) return Math.round(ms / 1000) + " s";
    var m = Math.floor(s / 60);
    if (s < 3600) return s % 60 === 0 ? m + " min" : m + " min " + (s % 60) + " s";
    var h = Math.floor(s / 3600);
    if (s < 48 * 3600) return m % 60 === 0 ? h + " h" : h + " h " + (m % 60) + " min";
    return Math.floor(s / 86400) + " days";
  }

  var seen = new WeakMap();

  function tickClocks() {
    if (document.hidden) return;
    var now = performance.now();
    document.querySelectorAll("[data-elapsed-ms]").forEach(function (el) {
      var t0 = seen.get(el);
      if (t0 === undefined) { seen.set(el, now); return; }
      var ms = Number(el.getAttribute("data-elapsed-ms")) + (now - t0);
      var text = human(ms);
      if (el.textContent !== text) el.textContent = text;
    });
  }

  watchEstimate();
  if (document.querySelector("#queue-live")) {
    tickClocks();
    setInterval(tickClocks, 1000);
  }
})();
