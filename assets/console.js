// ax console: shows every UTC time (<time datetime="…Z">, but those marked .fixed) in UTC or
// in the browser's time zone. The page is complete without this script; the choice is kept in localStorage.
(function () {
  "use strict";
  var KEY = "ax.console.zone";
  var button = document.getElementById("zone-switch");
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

  function show(zone) {
    var times = document.querySelectorAll("time[datetime$='Z']:not(.fixed)");
    for (var i = 0; i < times.length; i++) {
      var el = times[i];
      if (!el.hasAttribute("data-utc")) el.setAttribute("data-utc", el.textContent);
      var date = new Date(el.getAttribute("datetime"));
      el.textContent = zone === "local" && !isNaN(date) ? local(date) : el.getAttribute("data-utc");
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
})();
