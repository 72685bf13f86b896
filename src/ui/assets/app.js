// Episodic operator page. Plain JavaScript, no dependencies, no build step.
//
// Rules kept throughout: the API key lives in sessionStorage only and is sent as a bearer
// token to the same-origin /v1 API; every piece of API data reaches the DOM through
// textContent (via el() / text nodes), never parsed as HTML markup.
'use strict';

(function () {
  const KEY_STORE = 'episodic.apiKey';

  // ---------- small DOM helpers ----------

  const $ = (id) => document.getElementById(id);

  // el('td', {className: 'x', title: 'y'}, child...) ; children are nodes or strings
  // (strings become text nodes, so they are never parsed as HTML).
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v === undefined || v === null) continue;
        if (k === 'dataset') Object.assign(node.dataset, v);
        else if (k === 'text') node.textContent = String(v);
        else if (k === 'onclick') node.addEventListener('click', v);
        else node[k] = v;
      }
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function fmtScore(x) {
    return typeof x === 'number' ? x.toFixed(3) : '—';
  }

  // Local datetime-local value -> RFC 3339 UTC, or undefined when empty.
  function toRfc3339(value) {
    if (!value) return undefined;
    const d = new Date(value);
    if (Number.isNaN(d.getTime())) return undefined;
    return d.toISOString().replace('.000Z', 'Z');
  }

  function localTitle(ts) {
    const d = new Date(ts);
    return Number.isNaN(d.getTime()) ? undefined : 'local: ' + d.toLocaleString();
  }

  function timeCell(ts) {
    return el('td', { className: 'mono nowrap', title: localTitle(ts), text: ts || '—' });
  }

  // ---------- API access ----------

  class ApiError extends Error {
    constructor(status, problem, requestId) {
      super((problem && problem.detail) || 'request failed');
      this.status = status;
      this.problem = problem || {};
      this.requestId = (problem && problem.requestId) || requestId || null;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: 'application/json, application/problem+json' };
    const key = sessionStorage.getItem(KEY_STORE);
    if (key) headers.Authorization = 'Bearer ' + key;
    const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, { code: 'network_error', detail: 'could not reach the server: ' + e.message });
    }
    const text = await resp.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (_) {
      data = null;
    }
    if (!resp.ok) {
      const problem = data && typeof data === 'object' ? data : { code: 'http_' + resp.status, detail: text.slice(0, 300) };
      throw new ApiError(resp.status, problem, resp.headers.get('x-request-id'));
    }
    return data;
  }

  function qs(params) {
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== '' && v !== false) u.set(k, String(v));
    }
    const s = u.toString();
    return s ? '?' + s : '';
  }

  // ---------- problem display ----------

  function showProblem(box, err) {
    clear(box);
    if (!err) {
      box.hidden = true;
      return;
    }
    const p = err instanceof ApiError ? err.problem : { code: 'client_error', detail: String(err && err.message ? err.message : err) };
    const status = err instanceof ApiError && err.status ? String(err.status) : '';
    box.append(
      el('div', { className: 'problem-head' },
        el('strong', { className: 'problem-code', text: p.code || 'error' }),
        status ? el('span', { className: 'problem-status', text: ' HTTP ' + status }) : null,
        p.title ? el('span', { className: 'problem-title', text: ' — ' + p.title }) : null),
      el('div', { className: 'problem-detail', text: p.detail || '' }));
    if (Array.isArray(p.errors) && p.errors.length) {
      const ul = el('ul', { className: 'problem-errors' });
      for (const fe of p.errors) {
        ul.append(el('li', null, el('code', { text: fe.field || '(body)' }), ': ' + (fe.message || JSON.stringify(fe))));
      }
      box.append(ul);
    }
    if (p.missingRole) box.append(el('div', null, 'missing role: ', el('code', { text: p.missingRole })));
    const rid = err instanceof ApiError ? err.requestId : null;
    if (rid) box.append(el('div', { className: 'problem-rid' }, 'request id: ', el('code', { className: 'request-id', text: rid })));
    box.hidden = false;
  }

  // ---------- server status ----------

  async function checkServer() {
    const box = $('server-status');
    try {
      const r = await api('GET', '/readyz');
      box.textContent = r.status === 'degraded' ? 'server ready (scope index degraded)' : 'server ready';
      box.className = 'server-status ok';
    } catch (e) {
      box.textContent = e.problem && e.problem.code === 'not_ready' ? 'server loading…' : 'server unreachable';
      box.className = 'server-status bad';
    }
  }

  // ---------- session ----------

  function loggedIn() {
    return !!sessionStorage.getItem(KEY_STORE);
  }

  function renderSession() {
    const on = loggedIn();
    $('login-view').hidden = on;
    $('app-view').hidden = !on;
    $('session').hidden = !on;
    if (on) {
      const k = sessionStorage.getItem(KEY_STORE);
      $('session-key').textContent = 'key …' + k.slice(-4);
    }
  }

  async function login(ev) {
    ev.preventDefault();
    const input = $('api-key');
    const key = input.value.trim();
    input.value = '';
    showProblem($('login-problem'), null);
    if (!key) return;
    sessionStorage.setItem(KEY_STORE, key);
    renderSession();
    selectTab('timeline');
    const ok = await loadTimeline();
    if (!ok && timelineState.lastError && timelineState.lastError.status === 401) {
      const err = timelineState.lastError;
      logout();
      showProblem($('login-problem'), err);
      return;
    }
    refreshReviewCount();
  }

  function logout() {
    sessionStorage.removeItem(KEY_STORE);
    timelineState.gen++;
    timelineState.events = [];
    timelineState.byId = new Map();
    timelineState.pending = [];
    timelineState.removed = [];
    timelineState.view = null;
    for (const id of ['tl-svg', 'tl-types', 'recall-results', 'reviews-list', 'audit-rows', 'detail-fields', 'detail-history']) clear($(id));
    for (const id of ['timeline-problem', 'recall-problem', 'reviews-problem', 'audit-problem', 'detail-problem']) showProblem($(id), null);
    $('recall-evidence').textContent = '';
    $('recall-evidence-box').hidden = true;
    $('recall-legend').hidden = true;
    $('recall-stats').textContent = '';
    $('detail').hidden = true;
    $('reviews-count').hidden = true;
    renderSession();
  }

  // ---------- tabs ----------

  function selectTab(name) {
    for (const t of document.querySelectorAll('.tab')) {
      const on = t.dataset.tab === name;
      t.classList.toggle('active', on);
      t.setAttribute('aria-selected', on ? 'true' : 'false');
    }
    for (const p of document.querySelectorAll('.panel')) p.hidden = p.dataset.panel !== name;
    if (name === 'reviews') loadReviews();
    if (name === 'audit' && !$('audit-rows').firstChild) loadAudit(null);
  }

  // ---------- timeline ----------
  //
  // The timeline is drawn as SVG: a UTC time axis, one lane per actor (or per project) and a
  // lane of removals (deleted, erased, expired: their content is gone, so they sit at the
  // time of removal). Events are marks coloured by type; a correction is linked to what it
  // superseded; stale events get a dashed ring, superseded ones are hollow, pending reviews
  // are diamonds. Where a lane's events are closer than a mark is wide, they are drawn as one
  // cluster with their count (a click zooms into it), so 10,000 events stay readable. Every
  // page of the timeline API is loaded (up to MAX_EVENTS).

  const SVG_NS = 'http://www.w3.org/2000/svg';
  const PAGE = 500; // the timeline API's largest page
  const MAX_EVENTS = 50000;
  const MARK_PX = 12; // a single mark's width; closer events are drawn as one cluster
  const CLUSTER_SPAN_PX = 24;
  const LANE_H = 26;
  const AXIS_H = 30;
  const LABEL_W = 170;
  const MIN_SPAN = 2 * 60 * 1000; // two minutes
  const MAX_SPAN = 50 * 365 * 86400000;
  const TYPE_COLOURS = {
    user_preference_stated: '#2f6fae',
    correction_received: '#8a5cc2',
    task_milestone: '#2e9c8a',
    human_approval: '#1e7b45',
    tool_observed_event: '#d08b1c',
    incident_or_failure: '#b5524a',
  };
  const EXTRA_COLOURS = ['#3c4f8f', '#7a8b2f', '#c2569b', '#5d6b7a', '#0f7c9c', '#9c5a1e'];
  const MIXED_COLOUR = '#7d8ea3';
  const REMOVALS = ['deleted', 'erased', 'expired'];
  const REMOVED_LANE = '\u0000removed';

  const timelineState = {
    events: [], byId: new Map(), staleBy: {}, pending: [], removed: [], removedNote: '',
    view: null, lastError: null, gen: 0, truncated: false, layout: null,
  };

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null) continue;
        if (k === 'text') node.textContent = String(v);
        else if (k === 'dataset') Object.assign(node.dataset, v);
        else node.setAttribute(k, String(v));
      }
    }
    for (const c of children) if (c) node.append(c);
    return node;
  }

  function typeColour(type) {
    if (TYPE_COLOURS[type]) return TYPE_COLOURS[type];
    let h = 0;
    for (const ch of String(type)) h = (h * 31 + ch.codePointAt(0)) >>> 0;
    return EXTRA_COLOURS[h % EXTRA_COLOURS.length];
  }

  function timelineParams() {
    const f = $('timeline-form').elements;
    return {
      actorId: f.actorId.value.trim(),
      projectId: f.projectId.value.trim(),
      eventType: f.eventType.value.trim(),
      from: toRfc3339(f.from.value),
      to: toRfc3339(f.to.value),
      asOf: toRfc3339(f.asOf.value),
      includeSuperseded: f.includeSuperseded.checked ? 'true' : undefined,
    };
  }

  function laneMode() {
    return $('timeline-form').elements.lanes.value === 'project' ? 'project' : 'actor';
  }

  function statusBadge(status) {
    return el('span', { className: 'status status-' + String(status), text: status });
  }

  function openButton(id, label) {
    return el('button', { type: 'button', className: 'link open-event', dataset: { eventId: id }, text: label || 'history', onclick: () => openEvent(id) });
  }

  // Every page of the scope, then the pending reviews and the removals in it. Only the latest
  // call renders (a newer one supersedes a slower older one).
  async function loadTimeline() {
    const gen = ++timelineState.gen;
    const params = timelineParams();
    const box = $('timeline-problem');
    const info = $('timeline-info');
    info.textContent = 'loading…';
    const events = [];
    const staleBy = {};
    let cursor = null;
    let truncated = false;
    try {
      for (;;) {
        const page = await api('GET', '/v1/timeline' + qs(Object.assign({}, params, { limit: PAGE, markStale: 'true', cursor: cursor || undefined })));
        if (gen !== timelineState.gen) return false;
        events.push(...page.events);
        Object.assign(staleBy, page.staleBy || {});
        cursor = page.nextCursor || null;
        if (!cursor) break;
        if (events.length >= MAX_EVENTS) { truncated = true; break; }
        info.textContent = 'loading… ' + events.length.toLocaleString('en') + ' events';
      }
    } catch (e) {
      if (gen !== timelineState.gen) return false;
      timelineState.lastError = e;
      info.textContent = '';
      showProblem(box, e);
      return false;
    }
    timelineState.lastError = null;
    showProblem(box, null);
    const [pending, removed] = await Promise.all([loadPending(params), loadRemovals(params)]);
    if (gen !== timelineState.gen) return false;
    timelineState.events = events;
    timelineState.byId = new Map(events.map((e) => [e.eventId, e]));
    timelineState.staleBy = staleBy;
    timelineState.pending = pending.filter((e) => !timelineState.byId.has(e.eventId));
    timelineState.removed = removed.items;
    timelineState.removedNote = removed.note;
    timelineState.truncated = truncated;
    timelineState.view = fitView();
    renderTimeline();
    return true;
  }

  function inScope(e, p) {
    if (p.actorId && e.actorId !== p.actorId) return false;
    if (p.projectId && e.projectId !== p.projectId) return false;
    if (p.eventType && e.eventType !== p.eventType) return false;
    const t = Date.parse(e.occurredAt);
    if (p.from && t < Date.parse(p.from)) return false;
    if (p.to && t >= Date.parse(p.to)) return false;
    return true;
  }

  // Pending events the key may see in the review queue (none when it lacks the role).
  async function loadPending(params) {
    if (params.asOf) return [];
    try {
      const r = await api('GET', '/v1/reviews' + qs({ status: 'pending', limit: 1000 }));
      return r.reviews.map((x) => x.event).filter((e) => e && inScope(e, params));
    } catch (_) {
      return [];
    }
  }

  // Deletions, erasures and expiries from the audit trail (operator role), at their time.
  async function loadRemovals(params) {
    if (params.actorId || params.projectId || params.eventType || params.asOf) {
      return { items: [], note: 'removals are shown for an unfiltered scope only (their content is gone)' };
    }
    const items = [];
    try {
      for (const action of REMOVALS) {
        let cursor = null;
        for (let pages = 0; pages < 20; pages++) {
          const page = await api('GET', '/v1/audit' + qs({ action, limit: 1000, cursor: cursor || undefined }));
          for (const a of page.entries) {
            for (const id of a.eventIds || []) items.push({ eventId: id, action: a.action, at: a.at, t: Date.parse(a.at) });
          }
          cursor = page.nextCursor || null;
          if (!cursor) break;
        }
      }
    } catch (e) {
      return { items: [], note: e.status === 403 ? 'removals need a key with the operator role' : 'removals could not be read' };
    }
    return { items, note: '' };
  }

  function allTimes() {
    const ts = [];
    for (const e of timelineState.events) ts.push(Date.parse(e.occurredAt));
    for (const e of timelineState.pending) ts.push(Date.parse(e.occurredAt));
    for (const r of timelineState.removed) ts.push(r.t);
    return ts.filter((t) => !Number.isNaN(t));
  }

  function fitView() {
    const ts = allTimes();
    if (!ts.length) {
      const now = Date.now();
      return { t0: now - 7 * 86400000, t1: now };
    }
    let lo = Infinity;
    let hi = -Infinity;
    for (const t of ts) {
      if (t < lo) lo = t;
      if (t > hi) hi = t;
    }
    const span = Math.max(hi - lo, 10 * 60 * 1000);
    const pad = span * 0.04;
    lo = (lo + hi) / 2 - span / 2 - pad;
    hi = lo + span + 2 * pad;
    return clampView(lo, hi);
  }

  function clampView(t0, t1) {
    let span = Math.min(MAX_SPAN, Math.max(MIN_SPAN, t1 - t0));
    const mid = (t0 + t1) / 2;
    return { t0: mid - span / 2, t1: mid + span / 2 };
  }

  function zoom(factor, centre) {
    const v = timelineState.view;
    if (!v) return;
    const c = centre === undefined ? (v.t0 + v.t1) / 2 : centre;
    const span = Math.min(MAX_SPAN, Math.max(MIN_SPAN, (v.t1 - v.t0) * factor));
    const left = (c - v.t0) / (v.t1 - v.t0);
    timelineState.view = { t0: c - left * span, t1: c - left * span + span };
    scheduleRender();
  }

  function pan(fraction) {
    const v = timelineState.view;
    if (!v) return;
    const d = (v.t1 - v.t0) * fraction;
    timelineState.view = { t0: v.t0 + d, t1: v.t1 + d };
    scheduleRender();
  }

  let renderQueued = false;
  function scheduleRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(() => { renderQueued = false; renderTimeline(); });
  }

  // Axis ticks: the first step giving at most one label per ~110 px, aligned in UTC.
  const STEPS = [
    [60e3, 'minute'], [2 * 60e3, 'minute'], [5 * 60e3, 'minute'], [10 * 60e3, 'minute'], [15 * 60e3, 'minute'],
    [30 * 60e3, 'minute'], [36e5, 'minute'], [2 * 36e5, 'minute'], [3 * 36e5, 'minute'], [6 * 36e5, 'minute'],
    [12 * 36e5, 'minute'], [864e5, 'day'], [2 * 864e5, 'day'], [7 * 864e5, 'day'], [14 * 864e5, 'day'],
    [1, 'month'], [3, 'month'], [6, 'month'], [12, 'month'], [24, 'month'], [60, 'month'], [120, 'month'],
  ];
  const MONTH_MS = 30.44 * 864e5;

  function ticks(t0, t1, width) {
    const want = (t1 - t0) / Math.max(1, width / 110);
    const [step, unit] = STEPS.find(([s, u]) => (u === 'month' ? s * MONTH_MS : s) >= want) || STEPS[STEPS.length - 1];
    const out = [];
    if (unit === 'month') {
      const d = new Date(t0);
      let y = d.getUTCFullYear();
      let m = Math.floor(d.getUTCMonth() / Math.min(step, 12)) * Math.min(step, 12);
      if (step > 12) y = Math.floor(y / (step / 12)) * (step / 12);
      for (let i = 0; i < 400; i++) {
        const t = Date.UTC(y, m, 1);
        if (t > t1) break;
        if (t >= t0) out.push({ t, label: step >= 12 ? String(new Date(t).getUTCFullYear()) : new Date(t).toISOString().slice(0, 7) });
        m += step;
        while (m >= 12) { m -= 12; y += 1; }
      }
    } else {
      for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
        const iso = new Date(t).toISOString();
        let label = iso.slice(0, 10);
        if (unit === 'minute') label = (t % 864e5 === 0 || out.length === 0) ? iso.slice(5, 10) + ' ' + iso.slice(11, 16) : iso.slice(11, 16);
        out.push({ t, label });
      }
    }
    return out;
  }

  function fmtSpan(ms) {
    if (ms >= 2 * 365 * 864e5) return (ms / (365.25 * 864e5)).toFixed(1) + ' years';
    if (ms >= 60 * 864e5) return (ms / MONTH_MS).toFixed(1) + ' months';
    if (ms >= 2 * 864e5) return (ms / 864e5).toFixed(1) + ' days';
    if (ms >= 2 * 36e5) return (ms / 36e5).toFixed(1) + ' hours';
    return (ms / 60e3).toFixed(1) + ' minutes';
  }

  function fmtUtc(t) {
    return new Date(t).toISOString().slice(0, 16).replace('T', ' ');
  }

  // Lanes: name -> items sorted by time. An item is {t, e, kind} with kind 'event',
  // 'pending' or a removal action.
  function buildLanes() {
    const mode = laneMode();
    const lanes = new Map();
    const put = (name, item) => {
      if (!lanes.has(name)) lanes.set(name, []);
      lanes.get(name).push(item);
    };
    const laneOf = (e) => (mode === 'project' ? (e.projectId || '(no project)') : e.actorId);
    for (const e of timelineState.events) put(laneOf(e), { t: Date.parse(e.occurredAt), e, kind: 'event' });
    for (const e of timelineState.pending) put(laneOf(e), { t: Date.parse(e.occurredAt), e, kind: 'pending' });
    const names = [...lanes.keys()].sort((a, b) => a.localeCompare(b));
    if (timelineState.removed.length) {
      names.push(REMOVED_LANE);
      lanes.set(REMOVED_LANE, timelineState.removed.map((r) => ({ t: r.t, e: r, kind: r.action })));
    }
    for (const items of lanes.values()) items.sort((a, b) => a.t - b.t);
    return names.map((name) => ({ name, items: lanes.get(name) }));
  }

  function firstAtOrAfter(items, t) {
    let lo = 0;
    let hi = items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (items[mid].t < t) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  function markTitle(item) {
    const e = item.e;
    if (REMOVALS.includes(item.kind)) return item.kind + ' ' + e.at + '\n' + e.eventId + '\n(content removed; click for its history)';
    const lines = [e.occurredAt + ' · ' + e.eventType, 'actor ' + e.actorId + (e.projectId ? ' · project ' + e.projectId : ''), e.summary];
    if (item.kind === 'pending') lines.push('pending review');
    else if (e.status !== 'active') lines.push(e.status + (e.supersededBy ? ' by ' + e.supersededBy : ''));
    if (timelineState.staleBy[e.eventId]) lines.push('stale: newer ' + timelineState.staleBy[e.eventId]);
    return lines.join('\n');
  }

  function markNode(item, x, y) {
    const e = item.e;
    const cls = ['mark'];
    let shape;
    if (REMOVALS.includes(item.kind)) {
      cls.push('removed', item.kind);
      shape = svg('path', { d: `M${x - 5},${y - 5}L${x + 5},${y + 5}M${x - 5},${y + 5}L${x + 5},${y - 5}`, class: 'glyph' });
    } else if (item.kind === 'pending') {
      cls.push('pending');
      shape = svg('path', { d: `M${x},${y - 7}L${x + 7},${y}L${x},${y + 7}L${x - 7},${y}Z`, class: 'glyph', fill: typeColour(e.eventType) });
    } else {
      cls.push('status-' + e.status);
      shape = svg('circle', { cx: x, cy: y, r: 5.5, class: 'glyph', fill: typeColour(e.eventType), stroke: typeColour(e.eventType) });
    }
    const stale = item.kind === 'event' && timelineState.staleBy[e.eventId];
    if (stale) cls.push('stale');
    const g = svg('g', { class: cls.join(' '), tabindex: 0, role: 'button', dataset: { eventId: e.eventId, type: e.eventType || item.kind } },
      svg('title', { text: markTitle(item) }), shape,
      stale ? svg('circle', { cx: x, cy: y, r: 9, class: 'stale-ring' }) : null);
    g.addEventListener('click', (ev) => { if (!dragState.moved) { ev.stopPropagation(); openEvent(e.eventId); } });
    g.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') openEvent(e.eventId); });
    return g;
  }

  function countLabel(n) {
    return n >= 1000 ? (n / 1000).toFixed(n >= 10000 ? 0 : 1) + 'k' : String(n);
  }

  // The right edge of the glyph drawn for `n` events from x0 to xl: a cluster spans at most
  // CLUSTER_SPAN_PX of its events' positions (or its label's width), so it cannot grow along
  // a dense lane.
  function glyphRight(n, x0, xl) {
    if (n === 1) return x0 + MARK_PX / 2;
    return Math.max(Math.min(xl, x0 + CLUSTER_SPAN_PX) + MARK_PX / 2, x0 - MARK_PX / 2 + 8 + 6.5 * countLabel(n).length);
  }

  // One glyph for several events, spanning x0..x1, with their count.
  function clusterNode(items, x0, x1, y) {
    const counts = new Map();
    for (const it of items) {
      const k = REMOVALS.includes(it.kind) ? it.kind : it.e.eventType;
      counts.set(k, (counts.get(k) || 0) + 1);
    }
    const [top, topCount] = [...counts.entries()].sort((a, b) => b[1] - a[1])[0];
    const n = items.length;
    // Coloured by type when one type makes up most of it, else neutral (mixed).
    const mostly = topCount / n >= 0.6;
    const fill = !mostly ? MIXED_COLOUR : REMOVALS.includes(top) ? '#a4262c' : typeColour(top);
    const label = countLabel(n);
    const w = x1 - x0;
    const cx = (x0 + x1) / 2;
    const tFrom = items[0].t;
    const tTo = items[n - 1].t;
    const pending = items.filter((it) => it.kind === 'pending').length;
    const stale = items.filter((it) => it.kind === 'event' && timelineState.staleBy[it.e.eventId]).length;
    // A cluster of removals names its kinds as classes; a small cluster lists its ids.
    const kinds = REMOVALS.filter((k) => counts.has(k));
    const removals = kinds.length && items.every((it) => REMOVALS.includes(it.kind));
    const dataset = { count: n, from: tFrom, to: tTo };
    if (n <= 50) dataset.eventIds = items.map((it) => it.e.eventId).join(' ');
    const g = svg('g', { class: ['cluster'].concat(pending ? ['has-pending'] : [], removals ? ['removals'].concat(kinds) : []).join(' '),
      role: 'button', tabindex: 0, dataset },
    svg('title', { text: n + ' events from ' + fmtUtc(tFrom) + ' to ' + fmtUtc(tTo) + ' UTC\n' +
      [...counts.entries()].map(([k, c]) => c + ' ' + k).join('\n') +
      (pending ? '\n' + pending + ' pending review' : '') + (stale ? '\n' + stale + ' stale' : '') + '\nclick to zoom in' }),
    svg('rect', { x: cx - w / 2, y: y - 8, width: w, height: 16, rx: 4, fill, class: 'glyph' }),
    svg('text', { x: cx, y: y + 3, class: 'count', text: label }));
    // A strip along the bottom shows the mix of types (or removals), in proportion.
    let sx = cx - w / 2 + 2;
    for (const [k, c] of [...counts.entries()].sort()) {
      const sw = ((w - 4) * c) / n;
      g.append(svg('rect', { x: sx, y: y + 5, width: sw, height: 2.5, class: 'mix', fill: REMOVALS.includes(k) ? '#a4262c' : typeColour(k) }));
      sx += sw;
    }
    g.addEventListener('click', (ev) => {
      if (dragState.moved) return;
      ev.stopPropagation();
      const span = Math.max(tTo - tFrom, MIN_SPAN);
      timelineState.view = clampView(tFrom - span * 0.25, tTo + span * 0.25);
      scheduleRender();
    });
    return g;
  }

  function renderTimeline() {
    const host = $('tl-svg');
    const wrap = $('tl-wrap');
    while (host.firstChild) host.removeChild(host.firstChild);
    const v = timelineState.view;
    const lanes = buildLanes();
    const total = timelineState.events.length + timelineState.pending.length;
    const width = Math.max(600, wrap.clientWidth);
    const plotW = width - LABEL_W - 12;
    const height = AXIS_H + Math.max(1, lanes.length) * LANE_H + 8;
    host.setAttribute('width', width);
    host.setAttribute('height', height);
    host.setAttribute('viewBox', `0 0 ${width} ${height}`);
    if (!v) return;
    host.dataset.t0 = new Date(v.t0).toISOString();
    host.dataset.t1 = new Date(v.t1).toISOString();
    host.dataset.spanMs = String(Math.round(v.t1 - v.t0));
    const xOf = (t) => LABEL_W + ((t - v.t0) / (v.t1 - v.t0)) * plotW;
    const defs = svg('defs', null,
      svg('clipPath', { id: 'tl-clip' }, svg('rect', { x: LABEL_W, y: 0, width: plotW, height })),
      svg('marker', { id: 'tl-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
        svg('path', { d: 'M0,0L10,5L0,10Z', class: 'arrow' })));
    host.append(defs);
    timelineState.layout = { xOf, plotW, width };

    const grid = svg('g', { class: 'axis' });
    for (const tk of ticks(v.t0, v.t1, plotW)) {
      const x = xOf(tk.t);
      grid.append(svg('line', { x1: x, x2: x, y1: AXIS_H - 6, y2: height, class: 'grid' }),
        svg('text', { x: x + 3, y: AXIS_H - 12, class: 'tick', text: tk.label }));
    }
    grid.append(svg('line', { x1: LABEL_W, x2: LABEL_W + plotW, y1: AXIS_H - 6, y2: AXIS_H - 6, class: 'base' }));
    host.append(grid);

    const laneY = new Map();
    const body = svg('g', { class: 'lanes' });
    lanes.forEach((lane, i) => {
      const y = AXIS_H + i * LANE_H + LANE_H / 2;
      laneY.set(lane.name, y);
      const removed = lane.name === REMOVED_LANE;
      const name = removed ? 'removed' : lane.name;
      const row = svg('g', { class: 'lane' + (removed ? ' removed-lane' : ''), dataset: { lane: removed ? '' : lane.name, count: lane.items.length } },
        svg('rect', { x: 0, y: y - LANE_H / 2, width, height: LANE_H, class: i % 2 ? 'band odd' : 'band' }),
        svg('text', { x: 8, y: y + 4, class: 'lane-label' },
          svg('title', { text: removed ? 'deleted, erased and expired events, at the time of removal · ' + lane.items.length : name + ' · ' + lane.items.length + ' event(s)' }),
          document.createTextNode(name.length > 20 ? name.slice(0, 19) + '…' : name)),
        svg('text', { x: LABEL_W - 6, y: y + 4, class: 'lane-count', text: lane.items.length }));
      body.append(row);
    });
    host.append(body);

    // Links: from a correction to each event it superseded that is loaded.
    const posOf = new Map();
    for (const lane of lanes) {
      if (lane.name === REMOVED_LANE) continue;
      for (const it of lane.items) posOf.set(it.e.eventId, { x: xOf(it.t), y: laneY.get(lane.name) });
    }
    const links = svg('g', { class: 'links', 'clip-path': 'url(#tl-clip)' });
    for (const e of timelineState.events.concat(timelineState.pending)) {
      for (const target of e.supersedesEventIds || []) {
        const a = posOf.get(e.eventId);
        const b = posOf.get(target);
        if (!a || !b) continue;
        if ((a.x < LABEL_W && b.x < LABEL_W) || (a.x > LABEL_W + plotW && b.x > LABEL_W + plotW)) continue;
        const lift = Math.min(40, 12 + Math.abs(a.x - b.x) * 0.15);
        const cy = Math.min(a.y, b.y) - lift;
        links.append(svg('path', { d: `M${a.x},${a.y}Q${(a.x + b.x) / 2},${cy} ${b.x},${b.y}`, class: 'link',
          'marker-end': 'url(#tl-arrow)', dataset: { from: e.eventId, to: target } },
        svg('title', { text: e.eventId + ' supersedes ' + target })));
      }
    }
    host.append(links);

    // Marks, clustered per lane: walking a lane in time order, the next event joins the
    // current glyph while it would overlap it (a mark is MARK_PX wide, a cluster as wide as
    // its events' range, up to CLUSTER_SPAN_PX, or its count's label), so glyphs never
    // overlap and each stands for a contiguous pixel range of the lane.
    const marks = svg('g', { class: 'marks', 'clip-path': 'url(#tl-clip)' });
    let drawn = 0;
    let clusters = 0;
    for (const lane of lanes) {
      const y = laneY.get(lane.name);
      const items = lane.items;
      const end = firstAtOrAfter(items, v.t1 + (v.t1 - v.t0) * 0.01);
      let i = firstAtOrAfter(items, v.t0 - (v.t1 - v.t0) * 0.01);
      while (i < end) {
        const x0 = xOf(items[i].t);
        let xl = x0;
        let j = i + 1;
        while (j < end) {
          const xj = xOf(items[j].t);
          if (xj >= glyphRight(j - i, x0, xl) + MARK_PX / 2 + 1) break;
          xl = xj;
          j++;
        }
        if (j - i === 1) {
          marks.append(markNode(items[i], x0, y));
        } else {
          marks.append(clusterNode(items.slice(i, j), x0 - MARK_PX / 2, glyphRight(j - i, x0, xl), y));
          clusters++;
        }
        drawn++;
        i = j;
      }
    }
    host.append(marks);
    host.dataset.glyphs = String(drawn);
    host.dataset.clusters = String(clusters);

    $('tl-range').textContent = fmtUtc(v.t0) + ' — ' + fmtUtc(v.t1) + ' UTC · ' + fmtSpan(v.t1 - v.t0);
    const parts = [total.toLocaleString('en') + ' event(s) in ' + lanes.filter((l) => l.name !== REMOVED_LANE).length + ' ' + laneMode() + ' lane(s)'];
    if (timelineState.pending.length) parts.push(timelineState.pending.length + ' pending review');
    if (timelineState.removed.length) parts.push(timelineState.removed.length + ' removed');
    if (clusters) parts.push(clusters + ' cluster(s): zoom in or click one');
    if (timelineState.truncated) parts.push('only the first ' + MAX_EVENTS.toLocaleString('en') + ' are shown: narrow the scope');
    if (timelineState.removedNote) parts.push(timelineState.removedNote);
    $('timeline-info').textContent = parts.join(' · ');
    renderTypeLegend();
  }

  function renderTypeLegend() {
    const box = $('tl-types');
    clear(box);
    const types = new Map();
    for (const e of timelineState.events.concat(timelineState.pending)) types.set(e.eventType, (types.get(e.eventType) || 0) + 1);
    for (const [t, n] of [...types.entries()].sort()) {
      const sw = el('i', { className: 'sw' });
      sw.style.background = typeColour(t); // CSSOM, allowed by the CSP
      box.append(el('span', { className: 'tl-type', dataset: { type: t } }, sw, t + ' (' + n + ')'));
    }
  }

  // Wheel zooms around the pointer; dragging the background pans.
  const dragState = { down: false, x: 0, view: null, moved: false };

  function wireTimeline() {
    const host = $('tl-svg');
    host.addEventListener('wheel', (ev) => {
      const L = timelineState.layout;
      if (!timelineState.view || !L) return;
      ev.preventDefault();
      const r = host.getBoundingClientRect();
      const x = Math.min(LABEL_W + L.plotW, Math.max(LABEL_W, ev.clientX - r.left));
      const v = timelineState.view;
      const centre = v.t0 + ((x - LABEL_W) / L.plotW) * (v.t1 - v.t0);
      zoom(ev.deltaY > 0 ? 1.25 : 0.8, centre);
    }, { passive: false });
    host.addEventListener('pointerdown', (ev) => {
      if (!timelineState.view || ev.button !== 0) return;
      dragState.down = true;
      dragState.moved = false;
      dragState.x = ev.clientX;
      dragState.view = Object.assign({}, timelineState.view);
    });
    window.addEventListener('pointermove', (ev) => {
      if (!dragState.down || !timelineState.layout) return;
      const dx = ev.clientX - dragState.x;
      if (Math.abs(dx) > 3) dragState.moved = true;
      if (!dragState.moved) return;
      host.classList.add('dragging');
      const v = dragState.view;
      const dt = (dx / timelineState.layout.plotW) * (v.t1 - v.t0);
      timelineState.view = { t0: v.t0 - dt, t1: v.t1 - dt };
      scheduleRender();
    });
    window.addEventListener('pointerup', () => {
      dragState.down = false;
      host.classList.remove('dragging');
      // A click after a drag is not a click on a mark.
      setTimeout(() => { dragState.moved = false; }, 0);
    });
    $('tl-zoom-in').addEventListener('click', () => zoom(0.5));
    $('tl-zoom-out').addEventListener('click', () => zoom(2));
    $('tl-pan-left').addEventListener('click', () => pan(-0.25));
    $('tl-pan-right').addEventListener('click', () => pan(0.25));
    $('tl-fit').addEventListener('click', () => { timelineState.view = fitView(); scheduleRender(); });
    $('timeline-form').elements.lanes.addEventListener('change', () => scheduleRender());
    window.addEventListener('resize', () => { if (!$('panel-timeline').hidden) scheduleRender(); });
  }

  // ---------- recall ----------

  const COMPONENTS = ['relevance', 'lexical', 'context', 'episode', 'actor', 'date', 'question', 'recency', 'trust', 'confidence'];

  function list(v) {
    const s = v.trim();
    return s ? [s] : undefined;
  }

  function recallBody() {
    const f = $('recall-form').elements;
    const scope = {};
    const put = (k, v) => { if (v !== undefined && v !== '' && !(Array.isArray(v) && !v.length)) scope[k] = v; };
    put('actorIds', list(f.actorId.value));
    put('projectIds', list(f.projectId.value));
    put('eventTypes', list(f.eventType.value));
    put('resourceRefs', f.resourceRefs.value.split(',').map((s) => s.trim()).filter(Boolean));
    put('occurredAfter', toRfc3339(f.occurredAfter.value));
    put('occurredBefore', toRfc3339(f.occurredBefore.value));
    const body = { query: f.query.value, scope, limit: Number(f.limit.value) || 10 };
    if (f.includeSuperseded.checked) body.includeSuperseded = true;
    if (f.includeStale.checked) body.includeStale = true;
    const asOf = toRfc3339(f.asOf.value);
    if (asOf) body.asOf = asOf;
    return body;
  }

  // The positive contributions of a hit, which its bar stacks (the question signal is never
  // positive: it lowers the score and is listed, not drawn).
  function positiveSum(hit) {
    const b = hit.scoreBreakdown || {};
    return COMPONENTS.reduce((s, c) => s + Math.max(0, Number(b[c]) || 0), 0);
  }

  // `scale` is the widest bar's value (the largest positive sum among the shown hits): every
  // bar is drawn relative to it. Signals that contributed nothing are folded into one line.
  function breakdownView(hit, scale) {
    const b = hit.scoreBreakdown || {};
    const bar = el('div', { className: 'bar', title: 'score ' + fmtScore(hit.score) + ' (full width = ' + fmtScore(scale) + ')' });
    const used = COMPONENTS.filter((c) => Number(b[c]) !== 0);
    const zero = COMPONENTS.filter((c) => Number(b[c]) === 0);
    for (const c of used) {
      const v = Math.max(0, Number(b[c]) || 0);
      if (!v) continue;
      const seg = el('span', { className: 'seg ' + c, title: c + ' ' + fmtScore(v), dataset: { component: c } });
      seg.style.width = (scale > 0 ? (v / scale) * 100 : 0).toFixed(3) + '%'; // CSSOM, allowed by the CSP
      bar.append(seg);
    }
    const table = el('table', { className: 'breakdown' },
      el('thead', null, el('tr', null, el('th', { text: 'signal' }), el('th', { text: 'contribution' }), el('th', { text: 'why' }))));
    const tbody = el('tbody');
    const why = {
      relevance: 'cosine similarity ' + fmtScore(b.cosine) + ' to the query, weighted',
      lexical: 'BM25 ' + fmtScore(b.bm25) + ' for the query words, relative to the best match, weighted',
      context: 'how well the neighbouring events of the same source match, weighted',
      episode: 'how well the best-matching event of its episode (same source, close in time; itself included) matches, weighted',
      actor: 'the query names the actor ' + (hit.event ? hit.event.actorId : ''),
      date: 'the query names the date of occurredAt ' + (hit.event ? hit.event.occurredAt : ''),
      question: 'its text ends in a question: it asks rather than tells (never positive)',
      recency: 'age of occurredAt ' + (hit.event ? hit.event.occurredAt : ''),
      trust: 'source trust: ' + (hit.event ? hit.event.sourceTrust : ''),
      confidence: 'writer confidence: ' + (hit.event ? hit.event.confidence : ''),
    };
    for (const c of used) {
      tbody.append(el('tr', { className: 'component-' + c, dataset: { component: c } },
        el('td', null, el('i', { className: 'sw ' + c }), c),
        el('td', { className: 'mono num', text: fmtScore(b[c]) }),
        el('td', { className: 'hint', text: why[c] })));
    }
    tbody.append(el('tr', { className: 'total' },
      el('td', { text: 'score' }), el('td', { className: 'mono num', text: fmtScore(hit.score) }), el('td', { className: 'hint', text: 'sum of the contributions' })));
    table.append(tbody);
    const folded = zero.length
      ? el('p', { className: 'hint zero-signals', dataset: { components: zero.join(' ') } }, zero.length + ' signal(s) contributed nothing: ' + zero.join(', '))
      : null;
    const details = el('details', { className: 'why' },
      el('summary', { text: 'why: ' + used.map((c) => c + ' ' + fmtScore(b[c])).join(' + ') }), table, folded);
    return { bar, details };
  }

  async function runRecall(ev) {
    ev.preventDefault();
    const box = $('recall-problem');
    const out = $('recall-results');
    try {
      const resp = await api('POST', '/v1/recall', recallBody());
      showProblem(box, null);
      clear(out);
      const st = resp.stats || {};
      $('recall-stats').textContent = resp.results.length + ' hit(s) from ' + st.candidates + ' in-scope candidate(s) · vector path: ' + st.path;
      $('recall-legend').hidden = resp.results.length === 0;
      const scale = resp.results.reduce((m, h) => Math.max(m, positiveSum(h)), 0);
      const maxScore = resp.results.reduce((m, h) => Math.max(m, Number(h.score) || 0), 0);
      $('recall-scale').textContent = 'Bars are drawn to scale: full width = ' + fmtScore(scale) +
        (Math.abs(scale - maxScore) < 5e-4 ? ', the highest score shown.' : ', the largest sum of positive contributions shown (the question signal only lowers a score).') +
        ' Each bar stacks the hit’s weighted signals, which add up to its score.';
      $('recall-scale').dataset.scale = String(scale);
      resp.results.forEach((hit, i) => {
        const e = hit.event;
        const view = breakdownView(hit, scale);
        // Two lines per hit: rank, score, bar, status and summary; then where it comes from
        // and the (folded) breakdown.
        const head = el('div', { className: 'hit-head' },
          el('span', { className: 'rank', text: '#' + (i + 1) }),
          el('span', { className: 'score mono', text: 'score ' + fmtScore(hit.score) }),
          view.bar,
          statusBadge(e.status),
          hit.stale ? el('span', { className: 'status status-stale', title: hit.staleBy ? 'newer: ' + hit.staleBy : undefined, text: 'stale' }) : null,
          el('span', { className: 'summary', title: e.summary, text: e.summary }),
          openButton(e.eventId, 'history'));
        const meta = el('div', { className: 'meta' },
          el('code', { title: 'occurredAt', text: e.occurredAt }),
          el('span', { text: e.eventType }),
          el('span', { text: 'actor ' + e.actorId }),
          e.projectId ? el('span', { text: 'project ' + e.projectId }) : null,
          el('span', { className: 'mono', title: 'recordedAt ' + e.recordedAt, text: e.eventId }));
        const li = el('li', { className: 'hit', dataset: { eventId: e.eventId, score: String(hit.score) } },
          head, el('div', { className: 'hit-foot' }, meta, view.details));
        if (e.contentWarnings && e.contentWarnings.length) li.append(el('div', { className: 'warn', text: 'treat as data: ' + e.contentWarnings.join(', ') }));
        out.append(li);
      });
      if (!resp.results.length) out.append(el('li', { className: 'empty', text: 'Nothing in scope matched.' }));
      $('recall-evidence').textContent = resp.evidence || '';
      $('recall-evidence-box').hidden = !resp.evidence;
    } catch (e) {
      showProblem(box, e);
    }
  }

  // ---------- delete and erasure, confirmed in a dialog ----------
  //
  // The dialog first says what will happen (the event, or how many of the actor's events
  // this key sees and which would be kept); nothing is sent until Confirm. The receipt the
  // API returns is then shown in the same dialog, and the timeline reloaded.

  const dialogState = { run: null };

  function dl(pairs) {
    const list = el('dl', { className: 'fields' });
    for (const [k, v] of pairs) {
      if (v === undefined || v === null || v === '') continue;
      list.append(el('dt', { text: k }), el('dd', { className: k === 'summary' ? 'summary' : 'mono', text: v }));
    }
    return list;
  }

  function openDialog(title, body, confirmLabel, run) {
    $('confirm-title').textContent = title;
    const box = $('confirm-body');
    clear(box);
    box.append(...body);
    clear($('confirm-receipt'));
    $('confirm-receipt').hidden = true;
    showProblem($('confirm-problem'), null);
    $('confirm-ok').textContent = confirmLabel;
    $('confirm-ok').hidden = !run;
    $('confirm-ok').disabled = false;
    $('confirm-cancel').textContent = 'Cancel';
    dialogState.run = run;
    const d = $('confirm-dialog');
    if (!d.open) d.showModal();
  }

  function showReceipt(title, pairs, receipt) {
    $('confirm-title').textContent = title;
    const box = $('confirm-receipt');
    clear(box);
    box.append(dl(pairs), el('pre', { className: 'receipt-json', text: JSON.stringify(receipt, null, 2) }));
    box.hidden = false;
    $('confirm-ok').hidden = true;
    $('confirm-cancel').textContent = 'Close';
    dialogState.run = null;
  }

  async function confirmDialog() {
    const run = dialogState.run;
    if (!run) return;
    $('confirm-ok').disabled = true;
    try {
      await run();
    } catch (e) {
      showProblem($('confirm-problem'), e);
      $('confirm-ok').disabled = false;
    }
  }

  function askDelete(event) {
    openDialog('Delete this event?', [
      el('p', { text: 'The event is removed from every read at once (recall, timeline, get). Its audit history stays; compaction later purges its content physically. This cannot be undone.' }),
      dl([['eventId', event.eventId], ['summary', event.summary], ['actorId', event.actorId], ['projectId', event.projectId],
        ['eventType', event.eventType], ['occurredAt', event.occurredAt], ['status', event.status]]),
    ], 'Delete event', async () => {
      const r = await api('DELETE', '/v1/events/' + encodeURIComponent(event.eventId));
      showReceipt('Deleted', [['eventId', r.eventId], ['deletedAt', r.deletedAt], ['purged', String(r.purged)]], r);
      afterRemoval(event.eventId);
    });
  }

  // What an erasure of `actor` would do, as far as this key can see: every event of the actor
  // (active, superseded and pending review) whose retention.deleteOnRequest is true is erased,
  // the others kept.
  async function erasurePreview(actor) {
    const events = [];
    let cursor = null;
    for (;;) {
      const page = await api('GET', '/v1/timeline' + qs({ actorId: actor, includeSuperseded: 'true', limit: PAGE, cursor: cursor || undefined }));
      events.push(...page.events);
      cursor = page.nextCursor || null;
      if (!cursor) break;
    }
    const pending = await loadPending({ actorId: actor });
    const all = events.concat(pending.filter((p) => !events.some((e) => e.eventId === p.eventId)));
    const erased = all.filter((e) => e.retention && e.retention.deleteOnRequest);
    const kept = all.filter((e) => !(e.retention && e.retention.deleteOnRequest));
    const by = (list, s) => list.filter((e) => e.status === s).length;
    return { all, erased, kept, active: by(erased, 'active'), superseded: by(erased, 'superseded'), pending: by(erased, 'pending_review') };
  }

  async function askErasure(actor) {
    openDialog('Erase actor ' + actor + '?', [el('p', { className: 'hint', text: 'counting the actor’s events…' })], 'Erase', null);
    let p;
    try {
      p = await erasurePreview(actor);
    } catch (e) {
      showProblem($('confirm-problem'), e);
      return;
    }
    const sample = el('ul', { className: 'affected' });
    for (const e of p.erased.slice(0, 8)) sample.append(el('li', null, el('code', { text: e.occurredAt.slice(0, 10) }), ' ' + e.summary));
    if (p.erased.length > 8) sample.append(el('li', { className: 'hint', text: '… and ' + (p.erased.length - 8) + ' more' }));
    openDialog('Erase actor ' + actor + '?', [
      el('p', { className: 'erase-count' }, el('strong', { text: p.erased.length + ' event(s)' }),
        ' of actor ', el('code', { text: actor }), ' will be deleted (' + p.active + ' active, ' + p.superseded + ' superseded, ' + p.pending + ' pending review)' +
        (p.kept.length ? '; ' + p.kept.length + ' kept because retention.deleteOnRequest is false.' : '; none kept.')),
      sample,
      el('p', { className: 'hint', text: 'Counted from the events this key can see. The erasure itself needs a key that sees every privacy class, deletes every event of the actor marked deleteOnRequest, and cannot be undone.' }),
    ], 'Erase ' + p.erased.length + ' event(s)', async () => {
      const r = await api('POST', '/v1/erasure', { actorId: actor });
      showReceipt('Erased', [['actorId', r.actorId], ['erasedAt', r.erasedAt], ['erased', r.erased.length + ' event(s)'],
        ['kept', r.kept.length ? r.kept.map((k) => k.eventId + ' (' + k.reason + ')').join(', ') : 'none'], ['purged', String(r.purged)]], r);
      afterRemoval(null);
    });
  }

  function afterRemoval(eventId) {
    if (eventId && $('detail-id').textContent === eventId) openEvent(eventId);
    else $('detail').hidden = true;
    loadTimeline();
  }

  // ---------- reviews ----------

  async function refreshReviewCount() {
    try {
      const r = await api('GET', '/v1/reviews' + qs({ status: 'pending', limit: 1000 }));
      const badge = $('reviews-count');
      badge.textContent = String(r.reviews.length);
      badge.hidden = r.reviews.length === 0;
    } catch (_) {
      $('reviews-count').hidden = true;
    }
  }

  async function loadReviews() {
    const box = $('reviews-problem');
    const out = $('reviews-list');
    try {
      const r = await api('GET', '/v1/reviews' + qs({ status: 'pending', limit: 1000 }));
      showProblem(box, null);
      clear(out);
      $('reviews-info').textContent = r.reviews.length + ' pending review(s)';
      const badge = $('reviews-count');
      badge.textContent = String(r.reviews.length);
      badge.hidden = r.reviews.length === 0;
      for (const item of r.reviews) out.append(reviewItem(item));
    } catch (e) {
      showProblem(box, e);
    }
  }

  function reviewItem(item) {
    const e = item.event;
    const d = item.decision || {};
    const note = el('input', { className: 'note', placeholder: 'note (optional)', maxLength: 4096 });
    const result = el('div', { className: 'problem', hidden: true });
    const decide = async (approve) => {
      const verb = approve ? 'approve' : 'reject';
      const body = note.value.trim() ? { note: note.value.trim() } : undefined;
      try {
        const out = await api('POST', '/v1/reviews/' + encodeURIComponent(e.eventId) + '/' + verb, body);
        li.classList.add('decided');
        clear(actions);
        actions.append(el('span', { className: 'decided-msg status status-' + out.status, text: (approve ? 'approved' : 'rejected') + ' → ' + out.status + ' at ' + out.decidedAt }));
        refreshReviewCount();
      } catch (err) {
        showProblem(result, err);
      }
    };
    const actions = el('div', { className: 'actions' },
      note,
      el('button', { type: 'button', className: 'approve', dataset: { eventId: e.eventId }, text: 'Approve', onclick: () => decide(true) }),
      el('button', { type: 'button', className: 'reject danger', dataset: { eventId: e.eventId }, text: 'Reject', onclick: () => decide(false) }));
    const li = el('li', { className: 'review card', dataset: { eventId: e.eventId } },
      el('div', { className: 'hit-head' },
        statusBadge(e.status),
        el('span', { className: 'reason', text: 'review: ' + (d.reason || '') }),
        d.approverRole ? el('span', { className: 'hint', text: 'approver role: ' + d.approverRole }) : null,
        openButton(e.eventId, 'history')),
      el('p', { className: 'summary', text: e.summary }),
      el('div', { className: 'meta' },
        el('span', null, 'occurredAt ', el('code', { text: e.occurredAt })),
        el('span', null, 'recordedAt ', el('code', { text: e.recordedAt })),
        el('span', { text: e.eventType }),
        el('span', { text: 'actor ' + e.actorId }),
        el('span', { text: 'trust ' + e.sourceTrust }),
        el('span', { text: 'privacy ' + e.privacyClass }),
        el('span', { className: 'mono', text: e.eventId })),
      (e.contentWarnings && e.contentWarnings.length) ? el('div', { className: 'warn', text: 'treat as data: ' + e.contentWarnings.join(', ') }) : null,
      actions, result);
    return li;
  }

  // ---------- audit trail ----------

  const auditState = { stack: [], cursor: null, next: null, params: null };

  function auditParams() {
    const f = $('audit-form').elements;
    return {
      eventId: f.eventId.value.trim(),
      action: f.action.value,
      from: toRfc3339(f.from.value),
      to: toRfc3339(f.to.value),
      limit: f.limit.value,
    };
  }

  function compactJson(v) {
    if (v === null || v === undefined) return '';
    const s = JSON.stringify(v);
    return s === '{}' ? '' : s;
  }

  async function loadAudit(cursor) {
    const params = cursor ? auditState.params : auditParams();
    auditState.params = params;
    const box = $('audit-problem');
    try {
      const page = await api('GET', '/v1/audit' + qs(Object.assign({}, params, { cursor: cursor || undefined })));
      showProblem(box, null);
      auditState.cursor = cursor;
      auditState.next = page.nextCursor || null;
      const body = $('audit-rows');
      clear(body);
      for (const a of page.entries) {
        const ids = el('td', { className: 'ids' });
        for (const id of a.eventIds || []) ids.append(openButton(id, id));
        body.append(el('tr', { className: 'action-' + a.action },
          el('td', { className: 'mono num', text: a.seq }),
          timeCell(a.at),
          el('td', null, el('span', { className: 'action ' + actionKind(a.action), text: a.action })),
          el('td', { className: 'mono', text: a.keyId }),
          ids,
          el('td', { className: 'mono detail-json', text: compactJson(a.detail) })));
      }
      if (!page.entries.length) body.append(el('tr', null, el('td', { colSpan: 6, className: 'empty', text: 'No audit entries match.' })));
      $('audit-info').textContent = page.entries.length + ' entr' + (page.entries.length === 1 ? 'y' : 'ies') + (cursor ? ' (after #' + cursor + ')' : '');
      $('audit-next').hidden = !auditState.next;
      $('audit-first').hidden = !cursor;
    } catch (e) {
      showProblem(box, e);
    }
  }

  // ---------- event detail and history ----------

  function actionKind(action) {
    if (['write', 'deny', 'approve', 'reject'].includes(action)) return 'kind-decision';
    if (['correct', 'supersede'].includes(action)) return 'kind-supersession';
    if (['deleted', 'erased', 'expired', 'compact'].includes(action)) return 'kind-deletion';
    if (['recall', 'timeline', 'get', 'history'].includes(action)) return 'kind-read';
    return 'kind-other';
  }

  const KIND_LABEL = {
    'kind-decision': 'decision',
    'kind-supersession': 'supersession',
    'kind-deletion': 'deletion',
    'kind-read': 'read',
    'kind-other': 'other',
  };

  function historyLine(entry, eventId) {
    const d = entry.detail || {};
    const bits = [];
    if (d.decision && typeof d.decision === 'object') {
      bits.push('policy decision: ' + d.decision.decision + (d.decision.reason ? ' (' + d.decision.reason + ')' : ''));
      if (d.decision.approverRole) bits.push('approver role ' + d.decision.approverRole);
    }
    if (d.policyVersion) bits.push('policy ' + d.policyVersion);
    const writer = (entry.eventIds || [])[0];
    if (entry.action === 'correct' && writer !== eventId) bits.push('this event was superseded by ' + writer);
    else if (Array.isArray(d.supersedes) && d.supersedes.length) bits.push('supersedes ' + d.supersedes.join(', '));
    if (d.reason && !d.decision) bits.push('reason: ' + d.reason);
    if (d.replayed) bits.push('idempotent replay');
    if (entry.action === 'approve' || entry.action === 'reject') bits.push(d.noteHash ? 'with a note' : 'no note');
    if (['recall', 'timeline', 'get', 'history'].includes(entry.action)) bits.push('returned to a reader');
    return bits.join(' · ');
  }

  function field(dl, name, value) {
    if (value === undefined || value === null || value === '' || (Array.isArray(value) && !value.length)) return;
    let text = value;
    if (Array.isArray(value)) text = value.join(', ');
    else if (typeof value === 'object') text = JSON.stringify(value);
    dl.append(el('dt', { text: name }), el('dd', { className: name === 'summary' ? 'summary' : 'mono', text }));
  }

  let openSeq = 0; // only the latest openEvent() call may render
  const detailState = { event: null };

  async function openEvent(id) {
    const seq = ++openSeq;
    const panel = $('detail');
    panel.hidden = false;
    $('detail-id').textContent = id;
    const fields = $('detail-fields');
    const hist = $('detail-history');
    clear(fields);
    clear(hist);
    $('detail-note').textContent = 'loading…';
    showProblem($('detail-problem'), null);
    detailState.event = null;
    $('detail-actions').hidden = true;
    const path = '/v1/events/' + encodeURIComponent(id);
    const [got, history] = await Promise.allSettled([api('GET', path), api('GET', path + '/history')]);
    if (seq !== openSeq) return;
    let event = null;
    if (got.status === 'fulfilled') {
      event = got.value;
      $('detail-note').textContent = 'GET ' + path;
    } else if (history.status === 'fulfilled' && history.value.event) {
      event = history.value.event;
      $('detail-note').textContent = 'not retrievable (' + (got.reason.problem.code || 'error') + '); state from the history';
    } else if (history.status === 'fulfilled') {
      $('detail-note').textContent = 'This event is deleted: its content is gone, its history remains.';
    } else {
      $('detail-note').textContent = '';
    }
    if (event) {
      detailState.event = event;
      $('detail-erase-actor').textContent = event.actorId;
      $('detail-actions').hidden = false;
      for (const k of ['summary', 'status', 'eventType', 'actorId', 'projectId', 'occurredAt', 'recordedAt',
        'supersedesEventIds', 'supersededBy', 'supersededAt', 'correctionPath', 'sourceTrust', 'confidence',
        'privacyClass', 'retention', 'resourceRefs', 'sourceRefs', 'contentWarnings', 'policyVersion', 'tenantId']) {
        field(fields, k, event[k]);
      }
      const links = [].concat(event.supersedesEventIds || [], event.supersededBy ? [event.supersededBy] : []);
      if (links.length) {
        const dd = el('dd');
        for (const l of links) dd.append(openButton(l, l));
        fields.append(el('dt', { text: 'open related' }), dd);
      }
    }
    if (history.status === 'fulfilled') {
      for (const entry of history.value.history) {
        const kind = actionKind(entry.action);
        hist.append(el('li', { className: 'h ' + kind },
          el('div', { className: 'h-head' },
            el('span', { className: 'action ' + kind, text: entry.action }),
            el('span', { className: 'hint', text: KIND_LABEL[kind] }),
            el('code', { title: localTitle(entry.at), text: entry.at }),
            el('span', { className: 'hint', text: 'key ' + entry.keyId + ' · #' + entry.seq })),
          el('div', { className: 'h-line', text: historyLine(entry, id) })));
      }
      if (!history.value.history.length) hist.append(el('li', { className: 'empty', text: 'No history.' }));
    } else {
      showProblem($('detail-problem'), history.reason);
    }
    panel.scrollIntoView({ block: 'start' });
  }

  // ---------- wiring ----------

  function init() {
    $('login-form').addEventListener('submit', login);
    $('logout').addEventListener('click', logout);
    for (const t of document.querySelectorAll('.tab')) t.addEventListener('click', () => selectTab(t.dataset.tab));
    $('timeline-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadTimeline(); });
    wireTimeline();
    $('confirm-ok').addEventListener('click', confirmDialog);
    $('confirm-cancel').addEventListener('click', () => $('confirm-dialog').close());
    $('detail-delete').addEventListener('click', () => { if (detailState.event) askDelete(detailState.event); });
    $('detail-erase').addEventListener('click', () => { if (detailState.event) askErasure(detailState.event.actorId); });
    $('recall-form').addEventListener('submit', runRecall);
    $('reviews-refresh').addEventListener('click', loadReviews);
    $('audit-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadAudit(null); });
    $('audit-next').addEventListener('click', () => loadAudit(auditState.next));
    $('audit-first').addEventListener('click', () => loadAudit(null));
    $('detail-close').addEventListener('click', () => { $('detail').hidden = true; });
    renderSession();
    checkServer();
    if (loggedIn()) {
      selectTab('timeline');
      loadTimeline();
      refreshReviewCount();
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
