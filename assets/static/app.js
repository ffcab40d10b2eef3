// sheetq pages, made live: job events over Server-Sent Events update rows, progress and
// the job page in place; the reports and queue pages fetch their content again when it
// changes. Every page works without this script; it only saves reloads.
(function () {
  "use strict";

  var body = document.body;
  var conn = document.querySelector('[data-testid="conn-state"]');
  var banner = document.querySelector('[data-testid="reconnect-banner"]');

  // The stored event types of job_events (store.Event* constants).
  var STATE_EVENTS = ["accepted", "started", "succeeded", "attempt_failed", "failed", "recovered",
    "completed_from_file", "cancel_requested", "canceled", "requeued", "retried", "expired",
    "webhook_queued", "webhook_delivered", "webhook_failed"];

  function setConn(state) {
    if (!conn) return;
    conn.setAttribute("data-state", state);
    conn.textContent = state === "live" ? "live" : state === "down" ? "reconnecting…" : "not live";
    if (banner) banner.hidden = state !== "down";
  }

  // ---- words, as the server writes them (ui/format.go) ----

  function count(n) { return Number(n).toLocaleString("en-US"); }

  function duration(ms) {
    if (ms < 0) ms = 0;
    var s = Math.round(ms / 1000);
    if (ms < 1000) return Math.round(ms) + " ms";
    if (s < 60) return s + " s";
    var m = Math.floor(s / 60);
    if (m < 60) return s % 60 ? m + " min " + (s % 60) + " s" : m + " min";
    var h = Math.floor(m / 60);
    if (h < 48) return m % 60 ? h + " h " + (m % 60) + " min" : h + " h";
    return Math.floor(h / 24) + " days";
  }

  function percent(rows, total) {
    if (total <= 0) return 0;
    return Math.min(100, Math.max(0, Math.floor(rows * 100 / total)));
  }

  function progressText(rows, total, leftMs) {
    if (total == null || total < 0) return rows === 0 ? "no rows yet" : count(rows) + " rows";
    var s = count(rows) + " of " + count(total) + " rows · " + percent(rows, total) + "%";
    if (leftMs >= 0 && rows < total) s += " · about " + duration(Math.round(leftMs / 1000) * 1000) + " left";
    return s;
  }

  // ---- fetching server-rendered HTML ----

  function fetchHTML(url) {
    return fetch(url, { headers: { "Accept": "text/html" }, credentials: "same-origin" }).then(function (res) {
      if (res.status === 404) return null;
      if (!res.ok) throw new Error(url + ": " + res.status);
      return res.text();
    });
  }

  // swapFrom fetches url and replaces the element matching selector with the fetched one.
  function swapFrom(url, selector) {
    return fetchHTML(url).then(function (html) {
      if (html == null) return;
      var doc = new DOMParser().parseFromString(html, "text/html");
      var fresh = doc.querySelector(selector);
      var cur = document.querySelector(selector);
      if (!fresh || !cur) return;
      // Keep the keyboard focus on the same control across the swap.
      var focused = document.activeElement;
      var keep = focused && cur.contains(focused) ? focused.getAttribute("data-testid") : null;
      cur.replaceWith(document.adoptNode(fresh));
      if (keep) {
        var again = fresh.querySelector('[data-testid="' + keep + '"]');
        if (again) again.focus();
      }
    });
  }

  function fragment(html) {
    var t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content.firstElementChild;
  }

  // ---- the exports table and the job page ----

  function rowOf(id) {
    return document.querySelector('tr[data-testid="export-row"][data-id="' + CSS.escape(id) + '"]');
  }

  function jobPage(id) {
    var el = document.getElementById("job-live");
    return el && el.getAttribute("data-job") === id ? el : null;
  }

  // Several events of one job in a burst (a replay) cause one fetch.
  var pending = {};
  function later(key, fn) {
    if (pending[key]) return;
    pending[key] = setTimeout(function () {
      delete pending[key];
      fn().catch(function () { /* the next event or a reload will catch up */ });
    }, 80);
  }

  function refreshRow(id, job) {
    later("row:" + id, function () {
      return fetchHTML("/exports/" + encodeURIComponent(id) + "/row").then(function (html) {
        var cur = rowOf(id);
        if (html == null) {
          if (cur) cur.remove();
          return;
        }
        var fresh = fragment(html);
        if (cur) {
          cur.replaceWith(fresh);
        } else {
          addRow(fresh);
        }
      });
    });
  }

  function addRow(tr) {
    var table = document.getElementById("exports-table");
    if (!table) return;
    table.setAttribute("data-testid", "exports");
    table.hidden = false;
    var empty = document.querySelector('[data-testid="no-exports"]');
    if (empty) empty.remove();
    var tbody = table.tBodies[0];
    tbody.insertBefore(tr, tbody.firstChild);
  }

  // wanted says whether a job not on the page belongs at its top: only on the first page,
  // and only when it passes the filters.
  function wanted(job) {
    var table = document.getElementById("exports-table");
    if (!table || table.getAttribute("data-live") !== "true") return false;
    var st = table.getAttribute("data-filter-status");
    var rep = table.getAttribute("data-filter-report");
    return (!st || st === job.status) && (!rep || rep === job.report);
  }

  function onState(e) {
    var data;
    try { data = JSON.parse(e.data); } catch (err) { return; }
    if (e.lastEventId) lastID = e.lastEventId;
    var job = data.job;
    var id = job ? job.id : null;
    if (!id) return;
    if (jobPage(id)) {
      later("page", function () { return swapFrom(location.pathname, "#job-live"); });
    }
    if (rowOf(id) || wanted(job)) refreshRow(id, job);
  }

  function onDeleted(e) {
    var d;
    try { d = JSON.parse(e.data); } catch (err) { return; }
    var row = rowOf(d.id);
    if (row) row.parentNode.removeChild(row);
    // On the deleted export's own page, reloading shows that it is gone.
    if (jobPage(d.id)) location.reload();
  }

  function onSnapshot(e) {
    if (e.lastEventId) lastID = e.lastEventId;
    // Events were pruned while away: the page is fetched again as a whole.
    if (document.getElementById("job-live")) {
      later("page", function () { return swapFrom(location.pathname, "#job-live"); });
    } else if (document.getElementById("exports-table")) {
      later("page", function () { return swapFrom(location.pathname + location.search, "main"); });
    }
  }

  function onProgress(e) {
    var p;
    try { p = JSON.parse(e.data); } catch (err) { return; }
    var holders = [rowOf(p.id), jobPage(p.id)];
    holders.forEach(function (holder) {
      if (!holder) return;
      var total = p.total_rows == null ? -1 : p.total_rows;
      var bar = holder.querySelector('[data-testid="progress"], [data-testid="job-progress"]');
      if (bar) {
        if (total > 0) {
          bar.max = total;
          bar.value = Math.min(p.rows, total);
          bar.setAttribute("aria-valuenow", String(percent(p.rows, total)));
          bar.setAttribute("aria-valuemin", "0");
          bar.setAttribute("aria-valuemax", "100");
        } else {
          bar.removeAttribute("value"); // indeterminate while the total is unknown
          bar.removeAttribute("aria-valuenow");
        }
      }
      var started = Number(holder.getAttribute("data-started")) || 0;
      var left = -1;
      if (total > 0 && p.rows > 0 && started > 0) {
        var ran = Date.now() - started;
        if (ran > 0) left = ran / p.rows * (total - p.rows);
      }
      var text = holder.querySelector('[data-testid="progress-text"]');
      if (text) text.textContent = progressText(p.rows, total, left);
    });
  }

  // The retry countdown: "next try in 40 s" counts down between events.
  function tick() {
    document.querySelectorAll("[data-next]").forEach(function (holder) {
      var next = Number(holder.getAttribute("data-next")) || 0;
      var info = holder.querySelector('[data-testid="attempt-info"]');
      if (!next || !info || holder.getAttribute("data-status") !== "PENDING") return;
      var wait = next - Date.now();
      info.textContent = info.textContent.replace(/next try (in .*|now)$/,
        wait >= 1000 ? "next try in " + duration(Math.round(wait / 1000) * 1000) : "next try now");
    });
  }

  // ---- the job event stream ----

  var lastID = null;
  var source = null;

  function streamURL() {
    var url = body.getAttribute("data-events");
    if (!url) return null;
    if (lastID != null) {
      // After a closed stream the browser forgets the last id: it goes in the URL. The
      // id is the server's opaque cursor (digits and dots on PostgreSQL), never a number.
      url = url.replace(/([?&])last_event_id=[^&]*&?/, "$1").replace(/[?&]$/, "");
      url += (url.indexOf("?") < 0 ? "?" : "&") + "last_event_id=" + encodeURIComponent(lastID);
    }
    return url;
  }

  var away = false; // the page was left (pagehide): no reconnects until it is shown again

  function connect() {
    if (away) return;
    var url = streamURL();
    if (!url || !window.EventSource) return;
    source = new EventSource(url);
    source.onopen = function () { setConn("live"); };
    source.onerror = function () {
      setConn("down");
      // The browser retries by itself (sending Last-Event-ID) unless the server refused
      // the stream; then a new one starts after a pause, from the last id seen.
      if (source.readyState === EventSource.CLOSED) {
        source = null;
        setTimeout(connect, 3000);
      }
    };
    STATE_EVENTS.forEach(function (t) { source.addEventListener(t, onState); });
    source.addEventListener("progress", onProgress);
    source.addEventListener("snapshot", onSnapshot);
    source.addEventListener("deleted", onDeleted);
  }

  // ---- the reports and queue pages ----

  var reportsSource = null;

  function watchReports() {
    var live = document.getElementById("reports-live");
    if (!live || !window.EventSource) return;
    var refresh = function () {
      later("reports", function () {
        return fetchHTML("/reports?fragment=list").then(function (html) {
          if (html == null) return;
          var open = {};
          live.querySelectorAll("article[data-id] details[open]").forEach(function (d) {
            open[d.closest("article").getAttribute("data-id")] = true;
          });
          live.innerHTML = html;
          live.querySelectorAll("article[data-id]").forEach(function (a) {
            var d = a.querySelector("details");
            if (d && open[a.getAttribute("data-id")]) d.open = true;
          });
        });
      });
    };
    var opened = false;
    var listen = function () {
      if (away) return;
      var es = reportsSource = new EventSource("/reports/events");
      es.addEventListener("change", refresh);
      // A change while the stream was down would be missed: fetch again on every reconnect.
      es.onopen = function () {
        if (opened) refresh();
        opened = true;
      };
      es.onerror = function () {
        if (es.readyState === EventSource.CLOSED && reportsSource === es) setTimeout(listen, 3000);
      };
    };
    listen();
  }

  function watchQueue() {
    var live = document.getElementById("queue-live");
    if (!live) return;
    var every = Number(live.getAttribute("data-refresh")) || 5000;
    setInterval(function () {
      if (document.hidden) return;
      swapFrom(location.pathname + location.search, "#queue-live").catch(function () {});
    }, every);
  }

  // ---- forms ----

  function guardForms() {
    // The idempotency key already makes a second submit harmless; this only tells the
    // user that the first one is on its way.
    document.querySelectorAll('form[data-testid="export-form"]').forEach(function (form) {
      form.addEventListener("submit", function () {
        var btn = form.querySelector('[data-testid="submit-export"]');
        if (btn) {
          setTimeout(function () { btn.disabled = true; btn.textContent = "Starting…"; }, 0);
        }
      });
    });
    window.addEventListener("pageshow", function () {
      document.querySelectorAll('[data-testid="submit-export"]').forEach(function (btn) {
        btn.disabled = false;
        btn.textContent = "Start export";
      });
    });
  }

  // A page left for another stays in the browser's back/forward cache with its streams
  // open, and a browser allows only a few connections per host: close them on the way
  // out, and reconnect (from the last event seen) if the page is shown again.
  window.addEventListener("pagehide", function () {
    away = true;
    if (source) { source.close(); source = null; }
    if (reportsSource) { reportsSource.close(); reportsSource = null; }
  });
  window.addEventListener("pageshow", function (e) {
    away = false;
    if (!e.persisted) return;
    if (!source) connect();
    if (!reportsSource) watchReports();
  });

  // The state stays "static" until the stream opens or fails: no banner flashes on load.
  connect();
  watchReports();
  watchQueue();
  guardForms();
  setInterval(tick, 1000);
})();
