/* The instance drill-down of the HTML report (inlined into the page, allowed by its sha256 hash).
   Reads each benchmark's instances from its JSON block (the element "medhelm-data-N": {slug, models: [{model,
   instances}]}, each instance an object with named fields: instance_id, prompt_sha256, answer, expected, score,
   raw_score, missed, and when present error, judges [{label, score, explanation}], question, reference), builds
   a page of table rows at a time, and only ever sets textContent: no text of the run is parsed as markup. */
(function () {
  "use strict";
  var select = document.getElementById("bench-select");
  if (!select) { return; }
  var search = document.getElementById("search"), misses = document.getElementById("misses-only");
  var table = document.getElementById("instances-table");
  var tbody = table.querySelector("tbody"), counter = document.getElementById("row-count");
  var more = document.getElementById("show-more");
  var PAGE = parseInt(table.getAttribute("data-page-rows"), 10) || 500;
  var parsed = {}, haystacks = {}, limit = PAGE, timer = null;
  function instances(idx) {
    if (!(idx in parsed)) {
      var el = document.getElementById("medhelm-data-" + idx);
      var all = [];
      (el ? JSON.parse(el.textContent).models : []).forEach(function (group) {
        group.instances.forEach(function (inst) { inst.model = group.model; all.push(inst); });
      });
      parsed[idx] = all;
      haystacks[idx] = parsed[idx].map(function (inst) {
        var judges = (inst.judges || []).map(function (j) { return j.label + " " + (j.explanation || ""); });
        return [inst.model, inst.instance_id, inst.prompt_sha256, inst.answer, inst.expected, inst.error || "",
                judges.join(" "), inst.question || "", inst.reference || ""].join("\u0000").toLowerCase();
      });
    }
    return parsed[idx];
  }
  function cell(tr, value, className) {
    var td = document.createElement("td");
    if (className) { td.className = className; }
    if (value !== undefined) { td.textContent = value; }
    tr.appendChild(td);
    return td;
  }
  function text(td, value) {
    var div = document.createElement("div");
    div.className = "text";
    div.textContent = value;
    td.appendChild(div);
  }
  function fmt(v) { return v === null || v === undefined ? "–" : Number(v).toFixed(3); }
  function verdicts(td, judges) {
    var details = document.createElement("details"), summary = document.createElement("summary");
    summary.textContent = judges.length + " verdict" + (judges.length === 1 ? "" : "s");
    details.appendChild(summary);
    var ul = document.createElement("ul");
    judges.forEach(function (j) {
      var li = document.createElement("li"), b = document.createElement("b");
      b.textContent = j.label + (j.score === null || j.score === undefined ? "" : ": " + j.score);
      li.appendChild(b);
      if (j.explanation) { li.appendChild(document.createTextNode(" — " + j.explanation)); }
      ul.appendChild(li);
    });
    details.appendChild(ul);
    td.appendChild(details);
  }
  function row(inst) {
    var tr = document.createElement("tr"), td;
    if (inst.error) { tr.className = "error"; } else if (inst.missed) { tr.className = "miss"; }
    cell(tr, inst.model);
    cell(tr, inst.instance_id);
    if (inst.question) {
      td = cell(tr);
      text(td, inst.question);
      td.title = "prompt sha256 " + inst.prompt_sha256;
    } else {
      td = cell(tr, inst.prompt_sha256 ? "sha256 " + inst.prompt_sha256.slice(0, 12) + "…" : "–", "hash");
      td.title = "prompt sha256 " + inst.prompt_sha256 + " (the question is not in this report)";
    }
    text(cell(tr), inst.error ? "error: " + inst.error : inst.answer);
    text(cell(tr), inst.reference || inst.expected);
    td = cell(tr, inst.error ? "error" : fmt(inst.score) + (inst.missed ? " ✗ miss" : ""), "score");
    if (inst.raw_score !== null && inst.raw_score !== inst.score) { td.title = "raw " + inst.raw_score; }
    if (inst.judges && inst.judges.length) { verdicts(cell(tr), inst.judges); } else { cell(tr, "–"); }
    return tr;
  }
  function render() {
    var idx = select.value, all = instances(idx), hay = haystacks[idx];
    var needle = search.value.trim().toLowerCase(), onlyMisses = misses.checked;
    var frag = document.createDocumentFragment(), shown = 0, matching = 0;
    for (var i = 0; i < all.length; i++) {
      if (onlyMisses && !all[i].missed) { continue; }
      if (needle && hay[i].indexOf(needle) < 0) { continue; }
      matching++;
      if (shown < limit) { frag.appendChild(row(all[i])); shown++; }
    }
    tbody.textContent = "";
    tbody.appendChild(frag);
    counter.textContent = "showing " + shown + " of " + matching + " matching (" + all.length + " instances)";
    more.hidden = matching <= shown;
  }
  function reset() { limit = PAGE; render(); }
  select.addEventListener("change", reset);
  misses.addEventListener("change", reset);
  search.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(reset, 120); });
  more.addEventListener("click", function () { limit += PAGE; render(); });
  render();
  document.documentElement.setAttribute("data-medhelm-ready", "1");
})();
