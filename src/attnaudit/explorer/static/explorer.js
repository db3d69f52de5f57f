/* attnaudit explorer: a static single-page app over results/explorer/data (no server, no network).
 * Data files assign into window.ATTNAUDIT.data and are loaded on demand with <script> tags (fetch() of local
 * files fails under file://). Every text from the data is inserted with textContent, never parsed as HTML. */
(function () {
  "use strict";
  var A = (window.ATTNAUDIT = window.ATTNAUDIT || { data: {} });
  var app = document.getElementById("app");
  var crumbs = document.getElementById("crumbs");
  var ROWS_PER_VIEW = 100;
  var state = { listFilters: {}, listSort: null, listStart: 0, indexSort: null, colourBy: "attention" };

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "onclick" || k === "onchange" || k === "oninput") node[k] = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c != null) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }

  function load(key, src) {
    if (key in A.data) return Promise.resolve(A.data[key]);
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src;
      s.onload = function () { key in A.data ? resolve(A.data[key]) : reject(new Error(src + " defines no " + key)); };
      s.onerror = function () { reject(new Error("cannot load " + src)); };
      document.head.appendChild(s);
    });
  }

  function fmt(v, digits) {
    if (v === null || v === undefined || (typeof v === "number" && !isFinite(v))) return "–";
    if (typeof v === "number") return v.toFixed(digits === undefined ? 3 : digits);
    return String(v);
  }

  function labelName(dataset, c) {
    var names = (A.data.index.label_names || {})[dataset] || [];
    return names[c] !== undefined ? names[c] : String(c);
  }

  function findModel(dataset, model) {
    return A.data.index.models.filter(function (m) { return m.dataset === dataset && m.model === model; })[0];
  }

  function setCrumbs(parts) {
    crumbs.textContent = "";
    parts.forEach(function (p) {
      crumbs.appendChild(document.createTextNode(" / "));
      crumbs.appendChild(p.href ? el("a", { href: p.href, text: p.text }) : el("span", { text: p.text }));
    });
  }

  // a table whose header cells sort by column (numbers numerically, missing values last)
  function sortableTable(id, columns, rows, sortState, onSort) {
    var head = el("tr", {}, columns.map(function (c, i) {
      var cls = "sortable" + (sortState && sortState.col === i ? (sortState.asc ? " asc" : " desc") : "");
      return el("th", { "class": cls, "data-col": c.key, text: c.label, onclick: function () { onSort(i); } });
    }));
    var table = el("table", { id: id }, [el("thead", {}, [head])]);
    var body = el("tbody");
    rows.forEach(function (r) { body.appendChild(r); });
    table.appendChild(body);
    return table;
  }

  function sortRows(items, keyFn, sortState) {
    if (!sortState) return items;
    var dir = sortState.asc ? 1 : -1;
    return items.slice().sort(function (a, b) {
      var x = keyFn(a, sortState.col), y = keyFn(b, sortState.col);
      var xm = x === null || x === undefined, ym = y === null || y === undefined;
      if (xm || ym) return xm === ym ? 0 : xm ? 1 : -1;
      return (x < y ? -1 : x > y ? 1 : 0) * dir;
    });
  }

  function toggleSort(current, col) {
    return current && current.col === col ? { col: col, asc: !current.asc } : { col: col, asc: true };
  }

  // ---- index: datasets × models with the card numbers ----
  function renderIndex() {
    setCrumbs([]);
    var models = A.data.index.models;
    var keys = [], labels = {};
    models.forEach(function (m) {
      Object.keys(m.headline || {}).forEach(function (k) {
        if (keys.indexOf(k) < 0) { keys.push(k); labels[k] = m.headline[k].label; }
      });
    });
    var columns = [
      { key: "dataset", label: "dataset", get: function (m) { return m.dataset; } },
      { key: "model", label: "model", get: function (m) { return m.model; } },
      { key: "macro_f1", label: "test macro-F1", get: function (m) { return m.card ? m.card.metrics.test_macro_f1 : null; } },
      { key: "verdict", label: "verdict", get: function (m) { return m.card ? m.card.verdict.label : "no audit card"; } },
      { key: "checks", label: "checks passed", get: function (m) { return m.card && m.card.verdict.decided ? m.card.verdict.passed / m.card.verdict.decided : null; } }
    ].concat(keys.map(function (k) {
      return { key: k, label: labels[k], get: function (m) { return m.headline && m.headline[k] ? m.headline[k].value : null; } };
    })).concat([{ key: "missing", label: "missing", get: function (m) { return (m.missing || []).length + (m.card ? m.card.missing.length : 0); } }]);
    var sorted = sortRows(models, function (m, col) { return columns[col].get(m); }, state.indexSort);
    var rows = sorted.map(function (m) {
      var href = "#/model/" + encodeURIComponent(m.dataset) + "/" + encodeURIComponent(m.model);
      return el("tr", { "class": "model-row", "data-dataset": m.dataset, "data-model": m.model }, columns.map(function (c) {
        var v = c.get(m);
        if (c.key === "model") return el("td", {}, [el("a", { "class": "model-link", href: href, text: m.model })]);
        if (c.key === "checks") return el("td", { text: m.card && m.card.verdict.decided ? m.card.verdict.passed + "/" + m.card.verdict.decided : "–" });
        if (m.headline && m.headline[c.key]) return el("td", { text: fmt(v, m.headline[c.key].digits) + (m.headline[c.key].unit ? " " + m.headline[c.key].unit : "") });
        if (c.key === "missing") return el("td", { "class": v ? "missing" : "", title: (m.missing || []).concat(m.card ? m.card.missing : []).join("\n"), text: String(v) });
        return el("td", { text: fmt(v) });
      }));
    });
    app.textContent = "";
    app.appendChild(el("h1", { text: "Audit cards: " + models.length + " models" }));
    app.appendChild(el("p", { "class": "cite", text: "Split: " + A.data.index.split + ". Click a column header to sort, a model to open its card and instances." }));
    app.appendChild(sortableTable("index", columns, rows, state.indexSort, function (i) {
      state.indexSort = toggleSort(state.indexSort, i); renderIndex();
    }));
  }

  // ---- a card, rendered generically from its sections ----
  function renderCard(card) {
    var box = el("div", { id: "card" });
    if (!card) { box.appendChild(el("p", { "class": "missing", text: "No audit card for this model (missing audits)." })); return box; }
    box.appendChild(el("p", { "class": "verdict", id: "verdict" }, [el("b", { text: "Verdict: " }), card.verdict.line]));
    box.appendChild(el("p", { "class": "cite", text: "Verdict rule: " + card.verdict.rule }));
    var m = card.metrics;
    var metrics = ["test macro-F1 " + fmt(m.test_macro_f1) + ", accuracy " + fmt(m.test_accuracy) + "; per class: "];
    Object.keys(m.per_class_f1 || {}).forEach(function (k, i) {  // <bdi>: a right-to-left class name keeps its number
      metrics.push((i ? ", " : ""), el("bdi", { text: k }), " " + fmt(m.per_class_f1[k]));
    });
    box.appendChild(el("p", { id: "per-class" }, metrics));
    card.sections.forEach(function (s) {
      var sec = el("div", { "class": "card-section" }, [el("h3", { text: s.title }), el("div", { "class": "cite", text: s.citation })]);
      if (s.numbers.length) {
        var withCI = s.confidence !== null && s.confidence !== undefined && s.numbers.some(function (n) { return n.ci; });
        var heading = withCI ? "value [" + String(Math.round(s.confidence * 1e6) / 1e4) + " % CI]" : "value";  // render.py's value_heading
        var t = el("table", {}, [el("tr", {}, [el("th", { text: "measure" }), el("th", { text: heading }), el("th", { text: "source" })])]);
        s.numbers.forEach(function (n) {
          var d = n.digits === undefined ? 3 : n.digits;
          var v = fmt(n.value, d) + (n.unit ? " " + n.unit : "") + (n.ci ? " [" + fmt(n.ci[0], d) + ", " + fmt(n.ci[1], d) + "]" : "");
          t.appendChild(el("tr", {}, [el("td", { text: n.label }), el("td", { text: v }), el("td", { "class": "cite", text: n.citation })]));
        });
        sec.appendChild(t);
      }
      var ul = el("ul");
      s.checks.forEach(function (c) {
        var st = c.passed === null ? "undetermined" : c.passed ? "pass" : "fail";
        ul.appendChild(el("li", { "class": st }, [el("b", { text: st }), ": " + c.text + " ", el("span", { "class": "cite", text: "(rule: " + c.rule + ")" })]));
      });
      sec.appendChild(ul);
      box.appendChild(sec);
    });
    if (card.missing.length) {
      box.appendChild(el("h3", { "class": "missing", text: "Missing audits" }));
      box.appendChild(el("ul", { id: "missing" }, card.missing.map(function (x) { return el("li", { text: x }); })));
    }
    var notRun = Object.keys(card.not_run || {});
    if (notRun.length) {
      box.appendChild(el("h3", { text: "Audits not run for this model" }));
      box.appendChild(el("ul", { id: "not-run", "class": "cite" }, notRun.map(function (k) { return el("li", { text: k + ": " + card.not_run[k] }); })));
    }
    return box;
  }

  // ---- model: card + filterable, sortable, paged instance list ----
  function renderModel(dataset, model) {
    var entry = findModel(dataset, model);
    app.textContent = "";
    if (!entry) { app.appendChild(el("p", { "class": "missing", text: "Unknown model " + dataset + "/" + model })); return; }
    setCrumbs([{ text: dataset }, { text: model }]);
    app.appendChild(el("h1", { text: model + " on " + dataset }));
    app.appendChild(renderCard(entry.card));
    (entry.missing || []).forEach(function (x) { app.appendChild(el("p", { "class": "missing", text: "Missing: " + x })); });
    if (!entry.n_instances) return;
    var holder = el("div", { id: "instance-list" }, [el("p", { text: "Loading instances…" })]);
    app.appendChild(el("h2", { text: "Instances (" + entry.n_instances + ")" }));
    app.appendChild(holder);
    load("list:" + dataset + "/" + model, entry.dir + "list.js").then(function (list) {
      state.list = { key: dataset + "/" + model, list: list };
      renderList(entry, list, holder);
    }, function (err) { holder.textContent = String(err); });
  }

  function listFilters(entry) {
    var key = entry.dataset + "/" + entry.model;
    if (!state.listFilters[key]) state.listFilters[key] = { pred: "", correct: "", ranges: {} };
    return state.listFilters[key];
  }

  function renderList(entry, list, holder) {
    var f = listFilters(entry);
    var n = list.ids.length;
    var idx = [];
    for (var i = 0; i < n; i++) {
      if (f.pred !== "" && String(list.predicted[i]) !== f.pred) continue;
      var correct = list.predicted[i] === list.label[i];
      if (f.correct === "correct" && !correct) continue;
      if (f.correct === "wrong" && correct) continue;
      var ok = true;
      Object.keys(f.ranges).forEach(function (name) {
        var r = f.ranges[name], v = list.values[name][i];
        if ((r.min !== "" && !(v >= +r.min)) || (r.max !== "" && !(v <= +r.max))) ok = false;
      });
      if (ok) idx.push(i);
    }
    var valueNames = Object.keys(list.values);
    var columns = [
      { key: "id", label: "id", get: function (i) { return list.ids[i]; } },
      { key: "label", label: "label", get: function (i) { return labelName(entry.dataset, list.label[i]); } },
      { key: "predicted", label: "predicted", get: function (i) { return labelName(entry.dataset, list.predicted[i]); } },
      { key: "correct", label: "correct", get: function (i) { return list.predicted[i] === list.label[i] ? "yes" : "no"; } },
      { key: "prob", label: "p(ŷ)", get: function (i) { return list.prob[i]; } },
      { key: "n_tokens", label: "tokens", get: function (i) { return list.n_tokens[i]; } }
    ].concat(valueNames.map(function (name) { return { key: name, label: name, get: function (i) { return list.values[name][i]; } }; }));
    idx = sortRows(idx, function (i, col) { return columns[col].get(i); }, state.listSort);
    var start = Math.min(state.listStart, Math.max(0, idx.length - 1));
    start = start - (start % ROWS_PER_VIEW);
    var rows = idx.slice(start, start + ROWS_PER_VIEW).map(function (i) {
      var href = "#/instance/" + encodeURIComponent(entry.dataset) + "/" + encodeURIComponent(entry.model) + "/" + i;
      return el("tr", { "class": "instance-row", "data-index": String(i) }, columns.map(function (c) {
        var v = c.get(i);
        if (c.key === "id") return el("td", {}, [el("a", { "class": "instance-link", href: href, text: v })]);
        return el("td", { text: typeof v === "number" ? (c.key === "n_tokens" ? String(v) : fmt(v)) : v });
      }));
    });
    holder.textContent = "";
    // filters: predicted class, correctness, a range per per-instance value (ε-max JSD, τ, Δŷ)
    var pred = el("select", { id: "f-pred", onchange: function () { f.pred = this.value; state.listStart = 0; renderList(entry, list, holder); } },
      [el("option", { value: "", text: "any" })].concat(((A.data.index.label_names || {})[entry.dataset] || []).map(function (name, c) {
        return el("option", { value: String(c), text: name });
      })));
    pred.value = f.pred;
    var corr = el("select", { id: "f-correct", onchange: function () { f.correct = this.value; state.listStart = 0; renderList(entry, list, holder); } },
      [el("option", { value: "", text: "any" }), el("option", { value: "correct", text: "correct" }), el("option", { value: "wrong", text: "wrong" })]);
    corr.value = f.correct;
    var filters = el("div", { "class": "filters" }, [el("label", {}, ["predicted ", pred]), el("label", {}, ["prediction ", corr])]);
    valueNames.forEach(function (name) {
      var r = f.ranges[name] || (f.ranges[name] = { min: "", max: "" });
      ["min", "max"].forEach(function (bound) {
        var input = el("input", { type: "number", step: "any", "class": "f-range", "data-name": name, "data-bound": bound, placeholder: bound });
        input.value = r[bound];
        input.onchange = function () { r[bound] = this.value; state.listStart = 0; renderList(entry, list, holder); };
        filters.appendChild(el("label", {}, [name + " " + bound + " ", input]));
      });
    });
    holder.appendChild(filters);
    var pager = el("div", { "class": "pager", id: "list-pager" }, [
      el("button", { text: "◀ previous", onclick: function () { state.listStart = Math.max(0, start - ROWS_PER_VIEW); renderList(entry, list, holder); } }),
      el("button", { text: "next ▶", onclick: function () { if (start + ROWS_PER_VIEW < idx.length) { state.listStart = start + ROWS_PER_VIEW; renderList(entry, list, holder); } } }),
      el("span", { id: "list-count", text: idx.length ? (start + 1) + "–" + Math.min(idx.length, start + ROWS_PER_VIEW) + " of " + idx.length + " matching (" + n + " in all)" : "no instance matches" })
    ]);
    holder.appendChild(pager);
    holder.appendChild(sortableTable("instances", columns, rows, state.listSort, function (c) {
      state.listSort = toggleSort(state.listSort, c); renderList(entry, list, holder);
    }));
  }

  // ---- instance: tokens coloured by the chosen score ----
  function colour(v, scale) {
    if (v === null || !scale) return "transparent";
    var a = Math.min(1, Math.abs(v) / scale) * 0.85;
    return v >= 0 ? "rgba(214,69,38," + a.toFixed(3) + ")" : "rgba(38,99,214," + a.toFixed(3) + ")";
  }

  function renderInstance(dataset, model, i) {
    var entry = findModel(dataset, model);
    app.textContent = "";
    if (!entry || !(i >= 0 && i < entry.n_instances)) { app.appendChild(el("p", { "class": "missing", text: "Unknown instance" })); return; }
    var base = "#/model/" + encodeURIComponent(dataset) + "/" + encodeURIComponent(model);
    setCrumbs([{ text: dataset }, { text: model, href: base }, { text: "instance " + i }]);
    var page = Math.floor(i / entry.page_size);
    Promise.all([
      load("list:" + dataset + "/" + model, entry.dir + "list.js"),
      load("page:" + dataset + "/" + model + ":" + page, entry.dir + "page-" + String(page).padStart(5, "0") + ".js")
    ]).then(function (res) {
      var list = res[0], inst = res[1][i - page * entry.page_size];
      app.textContent = "";
      app.appendChild(el("h1", { id: "instance-id", text: inst.id }));
      var facts = el("table", { id: "instance-facts" }, [
        el("tr", {}, [el("th", { text: "label" }), el("td", { text: labelName(dataset, list.label[i]) })]),
        el("tr", {}, [el("th", { text: "predicted" }), el("td", {}, [el("bdi", { text: labelName(dataset, list.predicted[i]) }), " (p = " + fmt(list.prob[i]) + ")"])])
      ].concat(Object.keys(list.values).map(function (name) {
        return el("tr", {}, [el("th", { text: name }), el("td", { "data-name": name, text: fmt(list.values[name][i]) })]);
      })));
      app.appendChild(facts);
      if (inst.query) {  // QA/NLI: the question or hypothesis the attention over the passage is conditioned on
        app.appendChild(el("p", { id: "instance-query" }, [el("b", { text: "query: " }), el("bdi", { text: inst.query })]));
      }
      var names = (entry.overlays || []).filter(function (n) { return n in inst.scores; });
      if (names.indexOf(state.colourBy) < 0) state.colourBy = names[0];
      var select = el("select", { id: "colour-by" }, (entry.overlays || []).map(function (n) {
        var present = n in inst.scores, option = el("option", { value: n, text: present ? n : n + " (none for this instance)" });
        option.disabled = !present;
        return option;
      }));
      select.value = state.colourBy;
      var tokens = el("div", { id: "tokens" });
      var legend = el("span", { "class": "legend", id: "legend" });
      function paint() {
        var name = select.value, vals = inst.scores[name] || [];
        state.colourBy = name;
        var scale = vals.reduce(function (m, v) { return v === null ? m : Math.max(m, Math.abs(v)); }, 0);
        tokens.textContent = "";
        tokens.setAttribute("data-colour-by", name);
        var joined = {};  // tokens the text writes right after the one before (Chinese, Japanese, ...): no space
        (inst.joined || []).forEach(function (j) { joined[j] = true; });
        inst.tokens.forEach(function (t, j) {
          var v = vals[j] === undefined ? null : vals[j];
          var span = el("span", { "class": "tok", "data-index": String(j), "data-value": v === null ? "" : String(v), title: name + ": " + fmt(v, 4), text: t });
          span.style.background = colour(v, scale);
          if (j > 0 && !joined[j]) tokens.appendChild(document.createTextNode(" "));
          tokens.appendChild(span);
        });
        legend.textContent = " colour: |" + name + "| relative to this instance's maximum " + fmt(scale, 4) + " (red ≥ 0, blue < 0)";
      }
      select.onchange = paint;
      app.appendChild(el("div", { "class": "filters" }, [el("label", {}, ["colour by ", select]), legend]));
      app.appendChild(tokens);
      var here = "#/instance/" + encodeURIComponent(dataset) + "/" + encodeURIComponent(model) + "/";
      var nav = el("div", { "class": "pager" }, [
        i > 0 ? el("a", { href: here + (i - 1), id: "prev-instance", text: "◀ previous instance" }) : null, " ",
        i + 1 < entry.n_instances ? el("a", { href: here + (i + 1), id: "next-instance", text: "next instance ▶" }) : null
      ]);
      app.appendChild(nav);
      paint();
    }, function (err) { app.appendChild(el("p", { "class": "missing", text: String(err) })); });
  }

  function route() {
    if (!A.data.index) { app.textContent = "data/index.js is missing: rebuild the explorer."; return; }
    var parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
    if (parts[0] === "model" && parts.length >= 3) { state.listStart = 0; renderModel(parts[1], parts[2]); }
    else if (parts[0] === "instance" && parts.length >= 4) renderInstance(parts[1], parts[2], parseInt(parts[3], 10));
    else renderIndex();
    window.scrollTo(0, 0);
  }

  window.addEventListener("hashchange", route);
  route();
})();
