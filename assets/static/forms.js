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

  watchEstimate();
})();
