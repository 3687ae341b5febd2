// opscreen report: sort every table.sortable by a header click, filter the cases table,
// fill each op's "its cases" from the cases table. No network, no library.
(function () {
  "use strict";
  var NUM = /[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?/i;

  function sortKey(td, num) {
    if (!td) return num ? NaN : "";
    var v = td.getAttribute("data-v");
    var t = v !== null ? v : td.textContent.trim();
    if (!num) return t.toLowerCase();
    var m = t.match(NUM);
    return m ? parseFloat(m[0]) : NaN;
  }

  function sortBy(table, th) {
    var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
    var num = th.getAttribute("data-type") === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    Array.prototype.forEach.call(th.parentNode.children, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    var body = table.tBodies[0];
    var keyed = Array.prototype.map.call(body.rows, function (r, i) { return [sortKey(r.cells[idx], num), i, r]; });
    keyed.sort(function (a, b) {
      var x = a[0], y = b[0];
      if (num) {
        var xn = isNaN(x), yn = isNaN(y);
        if (xn || yn) return xn && yn ? a[1] - b[1] : (xn ? 1 : -1);  // no figure: last either way
        if (x !== y) return dir * (x - y);
      } else if (x !== y) {
        return dir * (x < y ? -1 : 1);
      }
      return a[1] - b[1];
    });
    var frag = document.createDocumentFragment();
    keyed.forEach(function (k) { frag.appendChild(k[2]); });
    body.appendChild(frag);
  }

  function sortable(table) {
    if (!table.tHead) return;
    table.tHead.addEventListener("click", function (ev) {
      var th = ev.target.closest("th");
      if (th) sortBy(table, th);
    });
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), sortable);

  var cases = document.getElementById("cases-table");
  var form = document.getElementById("case-filter");
  if (!cases || !form) return;
  var rows = Array.prototype.slice.call(cases.tBodies[0].rows);
  var text = rows.map(function (r) { return r.textContent.toLowerCase(); });
  var count = document.getElementById("case-count");
  var selects = Array.prototype.slice.call(form.querySelectorAll("select"));

  function apply() {
    var words = form.elements.q.value.toLowerCase().split(/\s+/).filter(Boolean);
    var want = selects.filter(function (s) { return s.value; }).map(function (s) { return [s.name, s.value]; });
    var shown = 0;
    rows.forEach(function (r, i) {
      var ok = words.every(function (w) { return text[i].indexOf(w) >= 0; }) &&
        want.every(function (kv) { return r.getAttribute("data-" + kv[0]) === kv[1]; });
      r.hidden = !ok;
      if (ok) shown += 1;
    });
    count.textContent = shown === rows.length ? rows.length + " cases" : shown + " of " + rows.length + " cases shown";
  }

  // a view can be linked: report.html?verdict=slower&q=float16&sort=change&desc=1
  var params = new URLSearchParams(window.location.search);
  var preset = false;
  params.forEach(function (v, k) {
    var el = form.elements[k];
    if (el && k !== "sort") { el.value = v; preset = true; }
  });
  if (params.get("sort")) {
    var th = Array.prototype.filter.call(cases.tHead.rows[0].cells, function (h) {
      return h.textContent === params.get("sort");
    })[0];
    if (th) {
      sortBy(cases, th);
      if (params.get("desc")) sortBy(cases, th);
    }
  }
  if (preset) apply();

  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("reset", function () { setTimeout(apply, 0); });

  // "all N in the cases table": set that filter alone, go there
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-filter]");
    if (!b) return;
    var kv = b.getAttribute("data-filter").split("=");
    form.reset();
    var sel = form.elements[kv[0]];
    if (sel) sel.value = kv[1];
    apply();
    document.getElementById("cases").scrollIntoView();
  });

  // an op's link (#op-NAME) opens its cases
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var sec = id && document.getElementById(id);
    var d = sec && sec.querySelector("details.op-cases");
    if (d && !d.open) d.open = true;
  }
  window.addEventListener("hashchange", openTarget);

  // an op's own cases, copied from the cases table when its section is opened
  Array.prototype.forEach.call(document.querySelectorAll("details.op-cases"), function (d) {
    d.addEventListener("toggle", function () {
      if (!d.open || d.getAttribute("data-filled")) return;
      var op = d.getAttribute("data-op");
      var t = document.createElement("table");
      t.className = "sortable cases";
      t.appendChild(cases.tHead.cloneNode(true));
      Array.prototype.forEach.call(t.tHead.querySelectorAll("th"), function (h) { h.removeAttribute("aria-sort"); });
      var body = document.createElement("tbody");
      rows.forEach(function (r) {
        if (r.getAttribute("data-op") === op) {
          var c = r.cloneNode(true);
          c.hidden = false;
          body.appendChild(c);
        }
      });
      t.appendChild(body);
      var note = d.querySelector("p.note");
      if (note) note.remove();
      d.appendChild(t);
      sortable(t);
      d.setAttribute("data-filled", "1");
    });
  });
  openTarget();
})();
