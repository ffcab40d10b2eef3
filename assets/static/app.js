// sheetq pages, made live: job events over Server-Sent Events update rows, progress and
// the job page in place; the reports and queue pages fetch their content again when it
// changes. Every page works without this script; it only saves reloads.
(function () {
  "use strict";

  var body = document.body;
  // Controls that only the script makes useful show, and those it replaces hide.
  document.documentElement.classList.remove("no-js");
  document.documentElement.classList.add("js");
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
      decorate(fresh);
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
          var box = cur.querySelector('[data-testid="row-select"]');
          var again = fresh.querySelector('[data-testid="row-select"]');
          if (box && again) again.checked = box.checked;
          cur.replaceWith(fresh);
        } else {
          addRow(fresh);
        }
        decorate(fresh);
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
    notifyIfEnded(job);
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
      if (holder.getAttribute("data-status") === "PENDING") return; // its state event comes first
      var bar = holder.querySelector('[data-testid="progress"], [data-testid="job-progress"]');
      if (bar && bar.tagName === "PROGRESS") {
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

  // Every second: the retry countdown ("next try in 40 s"), then "waiting for a worker"
  // once it is due; and the durations of what is running ("Ran 4 s so far").
  function tick() {
    document.querySelectorAll("[data-next]").forEach(function (holder) {
      var next = Number(holder.getAttribute("data-next")) || 0;
      var info = holder.querySelector('[data-testid="attempt-info"]');
      if (!next || !info || holder.getAttribute("data-status") !== "PENDING") return;
      var wait = next - Date.now();
      var att = "attempt " + info.getAttribute("data-attempt") + " of " + info.getAttribute("data-max");
      info.textContent = wait >= 1000 ? "retrying, " + att + ", next try in " + duration(Math.round(wait / 1000) * 1000)
        : att + ", waiting for a worker";
      var text = holder.querySelector('[data-testid="progress-text"]');
      if (text && wait < 1000) text.textContent = "waiting for a worker";
    });
    var now = Date.now();
    document.querySelectorAll("[data-tick-ms]").forEach(function (el) {
      // From when this page got the duration, by this browser's clock: no skew with
      // the server's clock can show in it.
      if (!el.hasAttribute("data-t0")) el.setAttribute("data-t0", String(now));
      var ms = Number(el.getAttribute("data-tick-ms")) + (now - Number(el.getAttribute("data-t0")));
      el.textContent = duration(ms) + (el.getAttribute("data-tick-suffix") || "");
    });
  }

  // ---- times in the viewer's zone ----

  // The server writes every time in the zone of the "tz" cookie (UTC without one), by
  // the zone's short name, once per place (issue 37). viewerZone keeps that cookie at
  // the browser's zone; when the page was written in another zone and may be loaded
  // again (a GET), it is, once, so that a browser's first page is in its zone too.
  function viewerZone() {
    if (!window.Intl || !Intl.DateTimeFormat) return;
    var tz = "";
    try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (err) { return; }
    if (!/^[A-Za-z0-9_+\-\/]+$/.test(tz)) return;
    if (/^(Etc\/)?(UTC|UCT|GMT|Universal|Zulu)$/.test(tz)) tz = "UTC";
    var has = function () {
      return document.cookie.split(/;\s*/).indexOf("tz=" + tz) >= 0;
    };
    if (has()) return;
    document.cookie = "tz=" + tz + "; path=/; max-age=31536000; SameSite=Lax";
    var body = document.body;
    if (has() && body.getAttribute("data-zone") !== tz && body.hasAttribute("data-reloadable")) location.reload();
  }

  // ---- notifications ----

  var notifyWanted = {};

  // notifyButtons shows "Notify me when it's done" where the browser can notify, and
  // marks the ones already asked for.
  function notifyButtons(root) {
    if (!("Notification" in window)) return;
    root.querySelectorAll("[data-notify]").forEach(function (btn) {
      btn.hidden = false;
      if (notifyWanted[btn.getAttribute("data-notify")]) {
        btn.disabled = true;
        btn.textContent = "You will be notified";
      }
    });
  }

  function askNotify(btn) {
    var id = btn.getAttribute("data-notify");
    var granted = function (p) {
      if (p !== "granted") {
        btn.textContent = "Notifications are blocked for this site";
        btn.disabled = true;
        return;
      }
      notifyWanted[id] = { title: (document.querySelector("h1") || {}).textContent || "Export" };
      notifyButtons(document);
    };
    if (Notification.permission === "granted") return granted("granted");
    var asked = Notification.requestPermission(granted);
    if (asked && asked.then) asked.then(granted);
  }

  var ENDED = { SUCCEEDED: "is ready", FAILED: "failed", CANCELED: "was canceled", EXPIRED: "expired" };

  function notifyIfEnded(job) {
    var want = notifyWanted[job.id];
    if (!want || !ENDED[job.status]) return;
    delete notifyWanted[job.id];
    try {
      var n = new Notification(want.title.trim() + " " + ENDED[job.status], {
        body: job.status === "SUCCEEDED" && job.progress ? count(job.progress.rows) + " rows" : "Export " + job.id,
        tag: "sheetq-" + job.id
      });
      n.onclick = function () { window.focus(); n.close(); };
    } catch (err) { /* a browser that only notifies from a service worker */ }
  }

  // ---- the exports list: filters, selection, load more ----

  function decorate(root) {
    notifyButtons(root);
    var all = document.querySelector('[data-testid="select-all"]');
    if (all) all.hidden = false;
  }

  document.addEventListener("change", function (e) {
    var t = e.target;
    if (t.matches && t.matches("select[data-autosubmit]") && t.form) {
      if (t.form.requestSubmit) t.form.requestSubmit(); else t.form.submit();
    } else if (t.matches && t.matches('[data-testid="select-all"]')) {
      document.querySelectorAll('[data-testid="row-select"]').forEach(function (b) { b.checked = t.checked; });
    }
  });

  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target.closest('[data-testid="load-more"], [data-notify]') : null;
    if (!t) return;
    if (t.hasAttribute("data-notify")) {
      askNotify(t);
      return;
    }
    e.preventDefault();
    loadMore(t);
  });

  // loadMore appends the next page's rows in place and keeps how many are shown in the
  // URL (?n=), so that a reload or going back shows the same rows.
  function loadMore(link) {
    if (link.getAttribute("aria-busy") === "true") return;
    link.setAttribute("aria-busy", "true");
    var href = link.getAttribute("href");
    fetchHTML(href).then(function (html) {
      link.removeAttribute("aria-busy");
      if (html == null) return;
      var doc = new DOMParser().parseFromString(html, "text/html");
      var tbody = document.querySelector("#exports-table tbody");
      if (!tbody) return;
      doc.querySelectorAll('#exports-table tbody tr[data-testid="export-row"]').forEach(function (tr) {
        if (rowOf(tr.getAttribute("data-id"))) return; // shifted down by new exports
        var row = document.adoptNode(tr);
        tbody.appendChild(row);
        decorate(row);
      });
      var next = doc.querySelector('[data-testid="load-more"]');
      if (next) link.setAttribute("href", next.getAttribute("href")); else link.closest(".more").remove();
      var url = new URL(location.href);
      url.searchParams.set("n", String(tbody.querySelectorAll('tr[data-testid="export-row"]').length));
      history.replaceState(history.state, "", url.pathname + url.search);
      var all = document.querySelector('[data-testid="select-all"]');
      if (all) all.checked = false;
    }).catch(function () {
      // The link still works as a link.
      link.removeAttribute("aria-busy");
      location.href = href;
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

  // The byte order mark box of the New export and schedule forms, and the New export
  // form's box that keeps formulas, are for CSV only: they are enabled while CSV is
  // chosen (the markup draws them disabled for Excel, without script).
  function watchCSVBoxes() {
    var format = document.getElementById("file-format");
    if (!format) return;
    var boxes = ["file-bom", "file-csv-formulas"].map(function (id) {
      return document.getElementById(id);
    }).filter(Boolean);
    if (!boxes.length) return;
    var sync = function () {
      boxes.forEach(function (box) { box.disabled = format.value !== "csv"; });
    };
    format.addEventListener("change", sync);
    format.addEventListener("input", sync);
    sync();
  }

  // The state stays "static" until the stream opens or fails: no banner flashes on load.
  watchCSVBoxes();
  connect();
  watchReports();
  watchQueue();
  guardForms();
  viewerZone();
  decorate(document);
  tick();
  setInterval(tick, 1000);
})();
