// Renders /openapi.json as a reference page. All text is inserted with textContent.
"use strict";

function el(tag, attrs, children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const c of children || []) if (c) node.appendChild(c);
  return node;
}

function refName(ref) { return ref.split("/").pop(); }

function resolve(spec, schema) {
  let s = schema || {};
  for (let i = 0; s.$ref && i < 10; i++) s = spec.components.schemas[refName(s.$ref)] || {};
  return s;
}

function typeLabel(schema) {
  if (!schema) return "";
  if (schema.$ref) return refName(schema.$ref);
  if (schema.enum) return schema.enum.map(String).join(" | ");
  const alts = schema.oneOf || schema.anyOf;
  if (alts) return alts.map(typeLabel).join(" | ");
  let t = Array.isArray(schema.type) ? schema.type.join(" | ") : (schema.type || "object");
  if (t.includes("array") && schema.items) t = t.replace("array", typeLabel(schema.items) + "[]");
  if (schema.format) t += " (" + schema.format + ")";
  return t;
}

function schemaTree(spec, schema, depth, seen) {
  const s = resolve(spec, schema);
  const list = el("ul", { class: "schema" });
  const name = schema && schema.$ref ? refName(schema.$ref) : null;
  if (depth > 4 || (name && seen.has(name))) return null;
  const nextSeen = new Set(seen); if (name) nextSeen.add(name);
  const alts = s.oneOf || s.anyOf;
  if (alts) {
    alts.forEach((alt, i) => {
      const item = el("li", {}, [el("span", { class: "type", text: "variant " + (i + 1) + ": " + typeLabel(alt) })]);
      const sub = schemaTree(spec, alt, depth + 1, nextSeen);
      if (sub) item.appendChild(sub);
      list.appendChild(item);
    });
    return list;
  }
  const props = s.properties || {};
  const required = new Set(s.required || []);
  for (const [key, prop] of Object.entries(props)) {
    const item = el("li", {}, [
      el("code", { text: key }), document.createTextNode(" "),
      el("span", { class: "type", text: typeLabel(prop) }),
      required.has(key) ? el("span", { class: "req", text: " required" }) : null,
      prop.description ? document.createTextNode(" — " + prop.description) : null,
    ]);
    const inner = prop.items && prop.items.$ref ? prop.items : prop;
    if (inner.$ref || (inner.properties && depth < 4)) {
      const sub = schemaTree(spec, inner, depth + 1, nextSeen);
      if (sub) item.appendChild(sub);
    }
    list.appendChild(item);
  }
  return list.children.length ? list : null;
}

function bodySchema(content) {
  if (!content) return null;
  const first = Object.entries(content)[0];
  return first ? { type: first[0], schema: first[1].schema } : null;
}

function parameters(op) {
  if (!op.parameters || !op.parameters.length) return null;
  const rows = op.parameters.map(p => el("tr", {}, [
    el("td", {}, [el("code", { text: p.name })]),
    el("td", { text: p.in }),
    el("td", { class: "type", text: typeLabel(p.schema) + (p.required ? "" : "?") }),
    el("td", { text: p.description || "" }),
  ]));
  return el("table", {}, [el("tr", {}, ["name", "in", "type", "description"].map(h => el("th", { text: h }))), ...rows]);
}

function responses(spec, op) {
  const rows = Object.entries(op.responses || {}).map(([status, r]) => {
    const b = bodySchema(r.content);
    return el("tr", {}, [
      el("td", {}, [el("code", { text: status })]),
      el("td", { text: r.description || "" }),
      el("td", { class: "type", text: b ? typeLabel(b.schema) + "  (" + b.type + ")" : "" }),
    ]);
  });
  return el("table", {}, [el("tr", {}, ["status", "description", "body"].map(h => el("th", { text: h }))), ...rows]);
}

function operation(spec, path, method, op, id) {
  const section = el("section", { class: "op", id }, [
    el("h2", {}, [el("span", { class: "method " + method, text: method }), el("span", { class: "path", text: path })]),
    el("p", { text: op.summary || "" }),
  ]);
  if (Array.isArray(op.security) && op.security.length && Object.keys(op.security[0]).length === 0) {
    section.appendChild(el("p", { class: "meta", text: "No authentication." }));
  }
  const params = parameters(op);
  if (params) { section.appendChild(el("h3", { text: "Parameters" })); section.appendChild(params); }
  const body = op.requestBody && bodySchema(op.requestBody.content);
  if (body) {
    section.appendChild(el("h3", { text: "Request body: " + typeLabel(body.schema) }));
    const tree = schemaTree(spec, body.schema, 0, new Set());
    if (tree) section.appendChild(tree);
  }
  section.appendChild(el("h3", { text: "Responses" }));
  section.appendChild(responses(spec, op));
  return section;
}

function render(spec) {
  document.getElementById("title").textContent = spec.info.title + " " + spec.info.version + " API reference";
  document.getElementById("description").textContent = spec.info.description || "";
  const main = document.getElementById("ops");
  const toc = document.getElementById("toc");
  main.textContent = "";
  const byTag = new Map();
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const method of ["get", "post", "put", "patch", "delete"]) {
      const op = item[method];
      if (!op) continue;
      const tag = (op.tags && op.tags[0]) || "other";
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push({ path, method, op });
    }
  }
  let n = 0;
  for (const [tag, ops] of byTag) {
    toc.appendChild(el("h3", { text: tag }));
    main.appendChild(el("h2", { text: tag }));
    for (const { path, method, op } of ops) {
      const id = "op-" + (n++);
      toc.appendChild(el("a", { href: "#" + id, text: method.toUpperCase() + " " + path }));
      main.appendChild(operation(spec, path, method, op, id));
    }
  }
  document.body.setAttribute("data-operations", String(n));
}

fetch("/openapi.json")
  .then(r => { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
  .then(render)
  .catch(e => {
    const status = document.getElementById("status");
    status.className = "error";
    status.textContent = "Could not load /openapi.json: " + e.message;
  });
