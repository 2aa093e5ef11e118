// ax console: shows every UTC time (<time datetime="…Z">, but those marked .fixed) in UTC or
// in the browser's time zone, relative ("3 min ago") in tables and lists with the absolute
// time on hover, absolute elsewhere with the relative one on hover; in the task editor, previews the next fire times from
// GET /api/cron/next as the cron or zone is typed and checks the params' JSON; on the tasks
// page, selects every row; on live pages, replaces the [data-live] regions when
// GET /api/events tells of a change (every 10 s without it); keyboard shortcuts (`?` lists
// them). Every page is complete without this script; the zone choice is kept in localStorage.
(function () {
  "use strict";
  var KEY = "ax.console.zone";
  var button = document.getElementById("zone-switch");
  editor();
  selection();
  live();
  keys();
  if (!button) return;

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  // "2024-01-05 10:00:00 UTC+01:00": the same shape as the server's UTC text.
  function local(date) {
    var offset = -date.getTimezoneOffset();
    var sign = offset < 0 ? "-" : "+";
    var abs = Math.abs(offset);
    return date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate()) +
      " " + pad(date.getHours()) + ":" + pad(date.getMinutes()) + ":" + pad(date.getSeconds()) +
      " UTC" + sign + pad(Math.floor(abs / 60)) + ":" + pad(abs % 60);
  }

  // "12 s ago", "in 5 min", "3 h ago", "in 2 d": ax works to the second.
  function relative(date, now) {
    var secs = Math.round((date.getTime() - now) / 1000);
    var abs = Math.abs(secs);
    var span = abs < 60 ? abs + " s" : abs < 3600 ? Math.floor(abs / 60) + " min" :
      abs < 172800 ? Math.floor(abs / 3600) + " h" : Math.floor(abs / 86400) + " d";
    return secs < 0 ? span + " ago" : secs === 0 ? "now" : "in " + span;
  }

  // A table cell or a list item reads best relative; a definition states the instant.
  function show(zone) {
    var times = document.querySelectorAll("time[datetime$='Z']:not(.fixed)");
    var now = Date.now();
    for (var i = 0; i < times.length; i++) {
      var el = times[i];
      if (!el.hasAttribute("data-utc")) el.setAttribute("data-utc", el.textContent);
      var date = new Date(el.getAttribute("datetime"));
      var absolute = zone === "local" && !isNaN(date) ? local(date) : el.getAttribute("data-utc");
      if (isNaN(date)) { el.textContent = absolute; continue; }
      var brief = !!el.closest("td, li");
      el.classList.toggle("relative", brief);
      el.textContent = brief ? relative(date, now) : absolute;
      el.title = brief ? absolute : relative(date, now);
    }
    button.textContent = zone === "local" ? "Times: browser zone" : "Times: UTC";
    button.setAttribute("aria-pressed", zone === "local" ? "true" : "false");
  }

  // Storage can be refused (private windows, policies): the switch then lasts for the page.
  function load() {
    try { return localStorage.getItem(KEY) || "utc"; } catch (e) { return "utc"; }
  }

  function save(zone) {
    try { localStorage.setItem(KEY, zone); } catch (e) { /* kept for this page only */ }
  }

  var zone = load();
  button.hidden = false;
  button.addEventListener("click", function () {
    zone = zone === "local" ? "utc" : "local";
    save(zone);
    show(zone);
  });
  show(zone);
  // Relative times move on while the page stays open.
  setInterval(function () { show(load()); }, 15000);

  function el(name, text, cls) {
    var node = document.createElement(name);
    if (text !== undefined) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  // The preview table, built as the server builds it (text only, never HTML from the reply).
  function previewTable(reply, zone, policy) {
    var table = el("table"), head = el("tr"), body = el("tbody");
    head.appendChild(el("th", "In " + zone));
    head.appendChild(el("th", "UTC"));
    head.appendChild(el("th", "Note"));
    var thead = el("thead");
    thead.appendChild(head);
    table.appendChild(thead);
    // Moved fires are among the times; the cron's own fires on a day off come in between.
    var rows = reply.times.concat((reply.excluded || []).map(function (fire) {
      return { utc: fire.utc, local: fire.local, note: fire.note, off: fire.calendar };
    }));
    rows.sort(function (a, b) { return a.utc < b.utc ? -1 : a.utc > b.utc ? 1 : 0; });
    rows.forEach(function (fire) {
      var row = el("tr", undefined, fire.off ? "day-off" : "");
      row.appendChild(el("td", fire.local.replace("T", " ").replace(/\.\d+/, "")
        .replace(/(Z|[+-]\d\d:\d\d)$/, " $1").replace(/ Z$/, " +00:00"), "mono"));
      row.appendChild(el("td", fire.utc.replace("T", " ").replace(/\.\d+Z$/, " UTC")));
      var note = el("td");
      if (fire.note) note.appendChild(el("span", fire.note, "badge warn"));
      if (fire.movedFrom) {
        note.appendChild(el("span", "moved from " + fire.movedFrom + " (" + fire.calendar + ")", "badge busy"));
      } else if (fire.off) {
        note.appendChild(el("span", "day off in " + fire.off + ": " +
          (policy === "SKIP" ? "left out" : "moved"), "badge idle"));
      } else if (!fire.note) {
        note.appendChild(el("span", "—", "none"));
      }
      row.appendChild(note);
      body.appendChild(row);
    });
    table.appendChild(body);
    var scroll = el("div", undefined, "scroll");
    scroll.appendChild(table);
    return scroll;
  }

  // Where the keyboard is in a region, to find it again in the region's new content.
  function focusKey(region) {
    var active = document.activeElement;
    if (!active || active === document.body || !region.contains(active)) return null;
    if (active.id) return "#" + CSS.escape(active.id);
    if (active.getAttribute("href")) return "[href=\"" + CSS.escape(active.getAttribute("href")) + "\"]";
    if (active.getAttribute("aria-label")) return "[aria-label=\"" + CSS.escape(active.getAttribute("aria-label")) + "\"]";
    return null;
  }

  // Scroll boxes inside a region keep their place; a log scrolled to its end follows new lines.
  function scrolls(region) {
    var kept = [];
    var boxes = region.querySelectorAll(".scroll, pre");
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      kept.push({ top: box.scrollTop, left: box.scrollLeft,
        end: box.scrollTop + box.clientHeight >= box.scrollHeight - 2 });
    }
    return kept;
  }

  function restore(region, kept) {
    var boxes = region.querySelectorAll(".scroll, pre");
    for (var i = 0; i < boxes.length && i < kept.length; i++) {
      var box = boxes[i];
      box.scrollLeft = kept[i].left;
      box.scrollTop = kept[i].end && box.tagName === "PRE" ? box.scrollHeight : kept[i].top;
    }
  }

  function swap(fresh) {
    var regions = document.querySelectorAll("[data-live]");
    for (var i = 0; i < regions.length; i++) {
      var region = regions[i];
      var next = fresh.getElementById(region.id);
      if (!next || next.innerHTML === region.innerHTML) continue;
      var focus = focusKey(region), kept = scrolls(region);
      region.innerHTML = next.innerHTML;
      restore(region, kept);
      var again = focus && region.querySelector(focus);
      if (again) again.focus({ preventScroll: true });
    }
    if (button) show(load());
  }

  function live() {
    var status = document.getElementById("live-status");
    if (!status || !window.fetch || !window.DOMParser) return;
    var run = status.getAttribute("data-run");
    var timer, busy = false, again = false, poll = null;
    status.hidden = false;
    var refresh = function () {
      if (busy) { again = true; return; }
      busy = true;
      fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
        .then(function (text) { swap(new DOMParser().parseFromString(text, "text/html")); })
        .catch(function () { /* the page as it is stays until the next change */ })
        .then(function () { busy = false; if (again) { again = false; soon(); } });
    };
    // A burst of changes (a fire of many runs) refetches the page once.
    var soon = function () { clearTimeout(timer); timer = setTimeout(refresh, 300); };
    var polling = function () {
      if (poll) return;
      status.textContent = "Refreshing every 10 s.";
      poll = setInterval(refresh, 10000);
    };
    if (!window.EventSource) { polling(); return; }
    var events = new EventSource(status.getAttribute("data-events"));
    var changed = function (e) {
      try { if (run && JSON.parse(e.data).requestId !== run) return; } catch (err) { return; }
      soon();
    };
    events.addEventListener("run", changed);
    events.addEventListener("log", changed);
    events.onopen = function () {
      if (poll) { clearInterval(poll); poll = null; soon(); }
      status.textContent = "Live: updates as runs change.";
    };
    // The browser reconnects by itself; until it does, the page refreshes on a timer.
    events.onerror = polling;
  }

  // Keys, as in mail and code-review tools: `/` the page's filter or the search box, `g` then a
  // letter to go to a section, `j`/`k` through a table's rows, Enter to open the current one,
  // `?` to list them.
  var SECTIONS = { d: "/console", t: "/console/tasks", r: "/console/runs", a: "/console/alerts",
    s: "/console/schedule" };

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  function keys() {
    var help = document.getElementById("keys-help");
    var go = false, goTimer, current = -1;
    var rows = function () { return document.querySelectorAll("main table tbody tr"); };
    var move = function (by) {
      var all = rows();
      if (!all.length) return;
      if (all[current]) all[current].classList.remove("current");
      current = Math.max(0, Math.min(all.length - 1, current + by));
      all[current].classList.add("current");
      all[current].scrollIntoView({ block: "nearest" });
    };
    var open = function () {
      var row = rows()[current];
      var link = row && row.querySelector("a[href]");
      if (!link) return false;
      location.href = link.getAttribute("href");
      return true;
    };
    document.addEventListener("keydown", function (e) {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      if (typing(e.target)) {
        if (e.key === "Escape") e.target.blur();
        return;
      }
      if (go) {
        go = false;
        if (SECTIONS[e.key]) { e.preventDefault(); location.href = SECTIONS[e.key]; }
        return;
      }
      var handled = true;
      if (e.key === "/") {
        // The page's own filter first (its name search); the search box of every page else.
        var search = document.querySelector("main form.filters input[type=search]") ||
          document.querySelector("main form.filters input:not([type=hidden])") ||
          document.getElementById("search-q");
        if (search) search.focus(); else handled = false;
      } else if (e.key === "g") {
        go = true;
        clearTimeout(goTimer);
        goTimer = setTimeout(function () { go = false; }, 1500);
      } else if (e.key === "j") move(1);
      else if (e.key === "k") move(-1);
      else if (e.key === "Enter" || e.key === "o") handled = open();
      else if (e.key === "?" && help) help.hidden = !help.hidden;
      else if (e.key === "Escape" && help) help.hidden = true;
      else handled = false;
      if (handled) e.preventDefault();
    });
  }

  // The calendars field's {exclude, policy} when it reads as such, else none (the server's
  // check names what is wrong on save).
  function calendarsOf(field) {
    if (!field || !field.value.trim()) return null;
    try {
      var value = JSON.parse(field.value);
      var names = value && Array.isArray(value.exclude) ? value.exclude.filter(function (n) {
        return typeof n === "string" && n; }) : [];
      return names.length ? { exclude: names, policy: value.policy } : null;
    } catch (e) {
      return null;
    }
  }

  function editor() {
    var cron = document.getElementById("cron");
    var tz = document.getElementById("timeZone");
    var calendars = document.getElementById("calendars");
    var preview = document.getElementById("preview");
    if (cron && tz && preview) {
      var timer, asked = 0;
      var update = function () {
        var n = ++asked;
        var days = calendarsOf(calendars), policy = days ? days.policy || "SKIP" : "SKIP";
        var url = "/api/cron/next?count=10&expr=" + encodeURIComponent(cron.value) +
          "&tz=" + encodeURIComponent(tz.value || "UTC") + (days ?
            "&calendar=" + encodeURIComponent(days.exclude.join(",")) +
            "&policy=" + encodeURIComponent(policy) : "");
        fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
          .then(function (r) { return r.json(); })
          .then(function (reply) {
            if (n !== asked) return; // a later keystroke asked again
            preview.textContent = "";
            if (reply.error) {
              preview.appendChild(el("p", reply.error.message, "error"));
              return;
            }
            var description = el("p", reply.description);
            description.id = "preview-description";
            preview.appendChild(description);
            preview.appendChild(reply.times.length ? previewTable(reply, tz.value || "UTC", policy) :
              el("p", "The schedule fires no more.", "muted"));
          })
          .catch(function () { /* the server's preview of the last save stays */ });
      };
      var soon = function () { clearTimeout(timer); timer = setTimeout(update, 250); };
      cron.addEventListener("input", soon);
      tz.addEventListener("input", soon);
      if (calendars) calendars.addEventListener("input", soon);
    }
    var params = document.getElementById("params");
    var check = document.getElementById("params-check");
    if (params && check) {
      var checkParams = function () {
        var text = params.value.trim();
        if (!text) { check.textContent = "Empty: {}"; return; }
        try {
          var value = JSON.parse(text);
          var object = value !== null && typeof value === "object" && !Array.isArray(value);
          check.textContent = object ? "Valid JSON object." : "Params must be a JSON object.";
          check.className = object ? "hint" : "hint error";
        } catch (e) {
          check.textContent = "Not valid JSON: " + e.message;
          check.className = "hint error";
        }
      };
      params.addEventListener("input", checkParams);
      checkParams();
    }
  }

  // The tasks page's selection: "n selected" in the bar of actions, which sticks to the bottom
  // of the window while rows are checked; once the whole page is, the choice of every task
  // matching the filters (the form then carries all=1 and the server finds them).
  function selection() {
    var form = document.getElementById("bulk");
    var all = document.getElementById("select-all");
    var matching = document.getElementById("select-matching");
    var allMatching = document.getElementById("all-matching");
    if (!form || !all || !matching || !allMatching) return;
    var boxes = form.querySelectorAll("input.select");
    var bar = form.querySelector(".bulk-bar");
    var count = document.getElementById("selected-count");
    var total = Number(matching.getAttribute("data-total")) || 0;
    all.hidden = false;
    var update = function () {
      var n = 0;
      for (var i = 0; i < boxes.length; i++) if (boxes[i].checked) n++;
      var whole = n === boxes.length;
      if (!whole) allMatching.disabled = true;
      var everything = !allMatching.disabled;
      all.checked = whole;
      bar.classList.toggle("selecting", n > 0);
      count.textContent = everything ? "All " + total + " matching selected" : n > 0 ? n + " selected" : "";
      matching.hidden = everything || !whole || total <= boxes.length;
    };
    all.addEventListener("change", function () {
      for (var i = 0; i < boxes.length; i++) boxes[i].checked = all.checked;
      update();
    });
    for (var i = 0; i < boxes.length; i++) boxes[i].addEventListener("change", update);
    matching.addEventListener("click", function () {
      allMatching.disabled = false;
      update();
    });
    update();
  }
})();
