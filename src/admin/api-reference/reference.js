// The API reference page: reads the OpenAPI documents this listener names in
// data-spec (the admin API's, then the data plane's) and lays out every
// operation of each with its parameters, body and responses. Text goes in through textContent only, never as HTML,
// so nothing in the document can run here.
(function () {
  "use strict";
  var METHODS = ["get", "post", "put", "patch", "delete"];
  var root = document.getElementById("reference");
  var specUrls = root.getAttribute("data-spec").split(" ").filter(Boolean);

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  /** Follow a local $ref ("#/components/schemas/X") once; anything else as it is. */
  function deref(doc, node) {
    if (node && typeof node.$ref === "string" && node.$ref.indexOf("#/") === 0) {
      var at = doc;
      var parts = node.$ref.slice(2).split("/");
      for (var i = 0; i < parts.length && at; i++) at = at[parts[i]];
      return at || node;
    }
    return node;
  }

  function schemaBlock(doc, schema) {
    return el("pre", null, JSON.stringify(deref(doc, schema), null, 2));
  }

  function parameters(doc, params) {
    var table = el("table");
    var head = el("tr");
    ["name", "in", "required", "type", "description"].forEach(function (h) {
      head.appendChild(el("th", null, h));
    });
    table.appendChild(head);
    params.forEach(function (p) {
      p = deref(doc, p);
      var row = el("tr");
      var type = p.schema ? deref(doc, p.schema).type || "" : "";
      [p.name, p.in, p.required ? "yes" : "no", type, p.description || ""].forEach(function (c) {
        row.appendChild(el("td", null, c));
      });
      table.appendChild(row);
    });
    return table;
  }

  function operation(doc, path, method, op) {
    var box = el("details", "op");
    var sum = el("summary");
    sum.appendChild(el("span", "method " + method, method.toUpperCase()));
    sum.appendChild(el("span", "path", path));
    if (op.summary) sum.appendChild(el("span", "summary", op.summary));
    box.appendChild(sum);
    var body = el("div", "body");
    if (op.description) body.appendChild(el("p", null, op.description));
    if (op.parameters && op.parameters.length) {
      body.appendChild(el("h3", null, "Parameters"));
      body.appendChild(parameters(doc, op.parameters));
    }
    var rb = op.requestBody && deref(doc, op.requestBody);
    if (rb && rb.content) {
      body.appendChild(el("h3", null, "Request body"));
      Object.keys(rb.content).forEach(function (type) {
        body.appendChild(el("div", null, type));
        if (rb.content[type].schema) body.appendChild(schemaBlock(doc, rb.content[type].schema));
      });
    }
    if (op.responses) {
      body.appendChild(el("h3", null, "Responses"));
      Object.keys(op.responses).forEach(function (status) {
        var r = deref(doc, op.responses[status]);
        body.appendChild(el("div", null, status + (r.description ? " — " + r.description : "")));
        var content = r.content || {};
        Object.keys(content).forEach(function (type) {
          if (content[type].schema) body.appendChild(schemaBlock(doc, content[type].schema));
        });
      });
    }
    box.appendChild(body);
    return box;
  }

  function render(doc, specUrl, first) {
    var info = doc.info || {};
    if (first) document.title = info.title || document.title;
    root.appendChild(el("h1", null, info.title || "API"));
    root.appendChild(el("p", "", (info.version ? "version " + info.version + " · " : "") + "OpenAPI " + (doc.openapi || "") + " · "));
    var raw = el("a", null, "the document as JSON");
    raw.href = specUrl;
    root.lastChild.appendChild(raw);
    root.lastChild.className = "meta";
    if (info.description) root.appendChild(el("p", null, info.description));
    // Group by the first tag (or the path's first segment after /admin/v1).
    var groups = {};
    var order = [];
    Object.keys(doc.paths || {})
      .sort()
      .forEach(function (path) {
        var item = doc.paths[path];
        METHODS.forEach(function (m) {
          var op = item[m];
          if (!op) return;
          var tag = (op.tags && op.tags[0]) || path.split("/").filter(Boolean).slice(0, 3).join("/");
          if (!groups[tag]) {
            groups[tag] = [];
            order.push(tag);
          }
          groups[tag].push(operation(doc, path, m, op));
        });
      });
    order.forEach(function (tag) {
      root.appendChild(el("h2", null, tag));
      groups[tag].forEach(function (box) {
        root.appendChild(box);
      });
    });
  }

  // Fetched together, rendered in the order named.
  Promise.all(
    specUrls.map(function (url) {
      return fetch(url, { headers: { accept: "application/json" } }).then(function (res) {
        if (!res.ok) throw new Error(url + " answered " + res.status);
        return res.json();
      });
    }),
  )
    .then(function (docs) {
      docs.forEach(function (doc, i) {
        render(doc, specUrls[i], i === 0);
      });
      root.setAttribute("data-rendered", "true");
    })
    .catch(function (err) {
      root.appendChild(el("p", "error", "Could not load the API description: " + err.message));
    });
})();
