/**
 * The live dashboard: draws the snapshot the page was served with at once,
 * then polls the admin listener's JSON snapshot twice a second and redraws.
 * Everything is built with DOM calls (names and fault reasons come from
 * agents: never parsed as HTML); nothing is fetched from anywhere but this
 * origin.
 */
import { errorRatio, firstResponseQuantile, requestRate, tokenRate, windowEnds } from "./traffic.js";

const SNAPSHOT_URL = "/admin/v1/dashboard";
const POLL_MS = 500;
const RATE_WINDOW_MS = 10_000;
/** Snapshots kept for rates (a little over the window). */
const HISTORY = Math.ceil(RATE_WINDOW_MS / POLL_MS) + 4;

const history = [];

/** How far back the sparklines go: the KPIs' values at each snapshot this page saw, kept in the page only. */
const TREND_MS = 5 * 60_000;
/** At most this many points a line (a poll every POLL_MS fills it; a slow one leaves gaps). */
const TREND_POINTS = Math.ceil(TREND_MS / POLL_MS);
const trend = [];

/** Create an element: attributes (`data-*`, `class`, `title`) and children (strings become text). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

/** A figure nobody reported: said in words, never drawn as 0. */
const NA = "not reported";
const GIB = 1024 ** 3;
const pct = (v) => (v === null ? NA : `${(v * 100).toFixed(v < 0.1 && v > 0 ? 1 : 0)}%`);
const gib = (v) => (v === null ? NA : `${(v / GIB).toFixed(v < 10 * GIB ? 1 : 0)}`);
const seconds = (v) => (v === null ? "—" : v < 1 ? `${Math.round(v * 1000)} ms` : `${v.toFixed(2)} s`);
const stateWords = { not_ready: "not ready", ready: "ready", draining: "draining", cordoned: "cordoned" };

/** A labelled bar; `ratio` null draws the bar as absent (hatched, "n/a"), never as an empty 0. */
function meter(name, ratio, text) {
  const fill = h("div", { class: ratio !== null && ratio >= 0.9 ? "fill hot" : "fill" });
  if (ratio !== null) fill.style.setProperty("width", `${Math.max(0, Math.min(1, ratio)) * 100}%`);
  return h(
    "div",
    { class: ratio === null ? "meter absent" : "meter", "data-meter": name },
    h("span", { class: "name" }, name),
    h("div", { class: "track" }, fill),
    h("span", { class: "num" }, text),
  );
}

/** What runs on the GPU: its endpoints (static) or replicas (fleet), or that nothing does. */
function servesView(g) {
  if (g.serves.length > 0) return h("div", { class: "gpu-serves", "data-serves": g.serves.join(" ") }, `→ ${g.serves.join(", ")}`);
  return h("div", { class: "gpu-serves none", "data-serves": "" }, g.exporter === null ? "free" : "no endpoint lists it");
}

/** "72 / 80 GiB"; a used figure nobody reported reads "not reported", whatever the size. */
function memoryText(g) {
  if (g.memory_used_bytes === null) return NA;
  return g.memory_total_bytes === null ? `${gib(g.memory_used_bytes)} GiB` : `${gib(g.memory_used_bytes)} / ${gib(g.memory_total_bytes)} GiB`;
}

function gpuView(card, g) {
  const mem = g.memory_total_bytes !== null && g.memory_used_bytes !== null ? g.memory_used_bytes / g.memory_total_bytes : null;
  const extra = [g.temperature_c === null ? null : `${Math.round(g.temperature_c)} °C`, g.power_w === null ? null : `${Math.round(g.power_w)} W`].filter(
    (x) => x !== null,
  );
  return h(
    "div",
    { class: "gpu", "data-gpu": `${card}/${g.index ?? g.uuid}`, "data-healthy": g.healthy },
    h("div", { class: "gpu-id", title: g.uuid }, `GPU ${g.index ?? "?"}`, h("small", {}, g.class)),
    h(
      "div",
      {},
      servesView(g),
      meter("mem", mem, memoryText(g)),
      meter("util", g.utilization, pct(g.utilization)),
      extra.length > 0 ? h("div", { class: "gpu-extra" }, extra.join(" · ")) : null,
    ),
    g.faults.map((f) => h("div", { class: "fault", "data-fault": "" }, `⚠ ${f}`)),
  );
}

/**
 * The card a GPU belongs on: its fleet node, or for a static endpoint's GPU
 * the machine its exporter runs on — the host, or host:port where several
 * exporters share a host (sim-engines on one laptop are separate machines).
 */
function cardNames(snap) {
  const exportersByHost = new Map();
  for (const g of snap.gpus) {
    if (g.exporter === null) continue;
    if (!exportersByHost.has(g.node)) exportersByHost.set(g.node, new Set());
    exportersByHost.get(g.node).add(g.exporter);
  }
  return (g) => (g.exporter !== null && exportersByHost.get(g.node).size > 1 ? new URL(g.exporter).host : g.node);
}

function nodesView(snap) {
  const cardOf = cardNames(snap);
  const byCard = new Map();
  for (const g of snap.gpus) {
    const card = cardOf(g);
    if (!byCard.has(card)) byCard.set(card, []);
    byCard.get(card).push(g);
  }
  // Fleet nodes first (in their order), then the machines of static endpoints' exporters, in the order of their endpoints.
  const cards = snap.nodes.map((n) => ({ name: n.name, node: n, gpus: byCard.get(n.name) ?? [] }));
  const endpointOrder = (gpus) =>
    Math.min(...gpus.flatMap((g) => g.serves.map((id) => snap.endpoints.findIndex((e) => e.id === id))).filter((i) => i >= 0), Infinity);
  const statics = [...byCard]
    .filter(([name]) => !snap.nodes.some((n) => n.name === name))
    .map(([name, gpus]) => ({ name, node: null, gpus, order: endpointOrder(gpus) }));
  statics.sort((a, b) => a.order - b.order || a.name.localeCompare(b.name));
  cards.push(...statics);
  if (cards.length === 0) return [h("p", { class: "empty" }, "No nodes or GPUs reported (no fleet, no dcgm_url).")];
  return cards.map(({ name, node, gpus }) => {
    const state = node ? node.state : "static";
    const replicas = snap.replicas.filter((r) => r.shards.some((s) => s.node === name));
    const note =
      node && !node.answering
        ? `no answer${node.last_answer_age_ms === null ? " yet" : ` for ${Math.round(node.last_answer_age_ms / 1000)} s`}`
        : `${replicas.length} replica(s)`;
    const endpoints = [...new Set(gpus.flatMap((g) => g.serves))];
    const staticNote = endpoints.length === 0 ? "static endpoint" : `static endpoint${endpoints.length > 1 ? "s" : ""} ${endpoints.join(", ")}`;
    return h(
      "div",
      { class: "node", "data-node": name, "data-state": state },
      h(
        "div",
        { class: "node-head" },
        h("span", { class: "node-name" }, name),
        h("span", { class: "node-note" }, node ? note : staticNote),
        node ? h("span", { class: `badge ${state}` }, stateWords[state] ?? state) : null,
      ),
      node && node.cordon_reason !== null
        ? h("div", { class: "node-note cordon", "data-cordon-reason": node.cordon_reason }, `cordoned: ${node.cordon_reason}`)
        : null,
      node?.last_error && !node.answering ? h("div", { class: "node-note" }, node.last_error) : null,
      gpus.length > 0
        ? gpus.map((g) => gpuView(name, g))
        : h("p", { class: "empty" }, node && !node.answering ? "GPUs not shown: the node does not answer." : "No GPUs reported."),
    );
  });
}

function rows(tbody, list, empty, row) {
  tbody.replaceChildren(...(list.length > 0 ? list.map(row) : [h("tr", {}, h("td", { colspan: 4, class: "empty" }, empty))]));
}

function render(snap) {
  document.getElementById("nodes").replaceChildren(...nodesView(snap));
  rows(document.querySelector("#models tbody"), snap.models, snap.fleet ? "No desired models." : "No fleet.", (m) =>
    h(
      "tr",
      { "data-model": m.name, class: m.serving < m.desired ? "short" : undefined },
      h("td", {}, m.name),
      h("td", { class: "num" }, `${m.serving} / ${m.desired}`),
    ),
  );
  rows(document.querySelector("#replicas tbody"), snap.replicas, snap.fleet ? "No replicas." : "No fleet.", (r) =>
    h(
      "tr",
      { "data-replica": r.id, "data-state": r.state, title: r.detail ?? "" },
      h("td", {}, r.id),
      h("td", {}, r.model),
      h("td", {}, h("span", { class: `badge ${r.state}` }, r.state), r.in_rotation ? "" : " (out of rotation)"),
      h("td", {}, r.shards.map((s) => `${s.node}:${s.gpus.join(",")}`).join(" ")),
    ),
  );
  document.getElementById("pools").replaceChildren(
    ...(snap.pools.length > 0
      ? snap.pools.map((p) =>
          h(
            "div",
            { class: "pool", "data-pool": p.name },
            h("div", { class: "pool-head" }, h("span", {}, p.name), h("span", {}, `queued ${p.queue_depth.reduce((n, b) => n + b.depth, 0)}`)),
            meter("sat", p.saturation, p.saturation === null ? NA : pct(p.saturation)),
            h(
              "div",
              { class: "bands" },
              p.queue_depth.map((b) => h("span", { "data-band": b.band }, `${b.band} `, h("b", {}, String(b.depth)))),
            ),
          ),
        )
      : [h("p", { class: "empty" }, "No pools yet.")]),
  );
  rows(document.querySelector("#endpoints tbody"), snap.endpoints, "No endpoints.", (e) =>
    h(
      "tr",
      { "data-endpoint": e.id },
      h("td", {}, e.id),
      h("td", {}, e.node ?? "—"),
      h(
        "td",
        {},
        h(
          "span",
          { class: `badge ${e.gpu_faulted ? "fault" : e.draining ? "draining" : e.ready ? "ok" : "not_ready"}` },
          e.gpu_faulted ? "GPU fault" : e.draining ? "draining" : e.ready ? "ready" : "not ready",
        ),
      ),
      h("td", { class: "num" }, String(e.inflight)),
    ),
  );
  const ready = snap.nodes.filter((n) => n.answering).length;
  document.getElementById("kpi-nodes").textContent = snap.fleet ? `${ready} / ${snap.nodes.length}` : "—";
  document.getElementById("kpi-gpus").textContent = snap.gpus.length > 0 ? `${snap.gpus.filter((g) => g.healthy).length} / ${snap.gpus.length}` : "—";
  const k = kpis();
  document.getElementById("kpi-rate").textContent = k.rate === null ? "—" : k.rate.toFixed(k.rate < 10 ? 1 : 0);
  document.getElementById("kpi-errors").textContent = k.errors === null ? "—" : pct(k.errors);
  firstResponseKpi("p50", k.p50);
  firstResponseKpi("p99", k.p99);
  document.getElementById("kpi-tokens").textContent = k.tokens === null ? "—" : k.tokens.toFixed(k.tokens < 10 ? 1 : 0);
  for (const [id, key] of [
    ["rate", "rate"],
    ["errors", "errors"],
    ["ttft-p50", "p50"],
    ["ttft-p99", "p99"],
    ["tokens", "tokens"],
  ]) {
    sparkline(document.getElementById(`spark-${id}`), trend, (t) => (key === "p50" || key === "p99" ? (t[key]?.value ?? null) : t[key]));
  }
}

/** The header's figures over the rate window ending at the newest snapshot. */
function kpis() {
  const ends = windowEnds(history, RATE_WINDOW_MS);
  if (!ends) return { rate: null, errors: null, p50: null, p99: null, tokens: null };
  return {
    rate: requestRate(ends.first, ends.last),
    errors: errorRatio(ends.first, ends.last),
    p50: firstResponseQuantile(ends.first, ends.last, 0.5),
    p99: firstResponseQuantile(ends.first, ends.last, 0.99),
    tokens: tokenRate(ends.first, ends.last),
  };
}

/** TTFT, or with no stream in the window the non-streamed requests' time to headers, said so in the label. */
function firstResponseKpi(q, figure) {
  const value = document.getElementById(`kpi-ttft-${q}`);
  const label = document.getElementById(`kpi-ttft-${q}-label`);
  const headers = figure?.kind === "headers";
  value.textContent = seconds(figure?.value ?? null);
  value.dataset.kind = figure?.kind ?? "";
  value.title = headers ? "no stream finished in the last 10 s: the time to response headers of non-streamed requests (their answer comes whole)" : "";
  label.textContent = `${headers ? "time to headers" : "TTFT"} ${q}`;
  label.classList.toggle("headers", headers);
}

/**
 * Draw `points` (the trend, oldest first) into an inline SVG: x is time from
 * the oldest point kept (at most TREND_MS back: a page open for a minute
 * fills the width with that minute), y the value from 0 to the highest one
 * seen; a point with no value breaks the line rather than drawing it at 0.
 */
function sparkline(svg, points, read) {
  const now = points.length > 0 ? points[points.length - 1].at : 0;
  const span = Math.max(POLL_MS, points.length > 0 ? now - points[0].at : 0);
  const values = points.map(read);
  const max = Math.max(0, ...values.filter((v) => v !== null));
  let d = "";
  let drawn = 0;
  let pen = false;
  points.forEach((p, i) => {
    const v = values[i];
    if (v === null) {
      pen = false;
      return;
    }
    const x = 120 - ((now - p.at) / span) * 120;
    const y = max > 0 ? 23 - (v / max) * 22 : 23;
    d += `${pen ? "L" : "M"}${x.toFixed(1)} ${y.toFixed(1)}`;
    pen = true;
    drawn++;
  });
  svg.querySelector("path").setAttribute("d", d);
  svg.dataset.points = String(drawn);
  svg.dataset.max = String(max);
}

function setStatus(live, text) {
  const el = document.getElementById("status");
  el.dataset.live = String(live);
  el.textContent = text;
}

function show(snap) {
  // A gateway that restarted counts from 0 again: rates restart with it.
  const last = history[history.length - 1];
  if (last && snap.traffic.requests < last.traffic.requests) history.length = 0;
  history.push(snap);
  if (history.length > HISTORY) history.shift();
  const { rate, errors, p50, p99, tokens } = kpis();
  trend.push({ at: snap.at, rate, errors, p50, p99, tokens });
  while (trend.length > TREND_POINTS || (trend.length > 0 && snap.at - trend[0].at > TREND_MS)) trend.shift();
  render(snap);
}

async function poll() {
  try {
    const res = await fetch(SNAPSHOT_URL, { cache: "no-store" });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const snap = await res.json();
    show(snap);
    setStatus(true, `live · ${new Date(snap.at).toLocaleTimeString()}`);
    document.body.dataset.snapshotAt = String(snap.at);
  } catch (err) {
    setStatus(false, `gateway unreachable (${err instanceof Error ? err.message : String(err)}); retrying`);
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

/** The snapshot the page was served with: drawn before the first poll has answered. */
function showInitial() {
  const block = document.getElementById("initial-snapshot");
  if (!block) return;
  try {
    const snap = JSON.parse(block.textContent ?? "");
    show(snap);
    setStatus("initial", `as of ${new Date(snap.at).toLocaleTimeString()} · connecting…`);
  } catch {
    // A page without a usable snapshot simply waits for its first poll.
  }
}

showInitial();
void poll();
