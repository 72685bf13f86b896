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
      box.textContent = 'server ready · ' + r.events + ' events';
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
    const ok = await loadTimeline(null);
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
    for (const id of ['timeline-rows', 'recall-results', 'reviews-list', 'audit-rows', 'detail-fields', 'detail-history']) clear($(id));
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

  const timelineState = { cursor: null, next: null, params: null, lastError: null };

  function timelineParams() {
    const f = $('timeline-form').elements;
    return {
      actorId: f.actorId.value.trim(),
      projectId: f.projectId.value.trim(),
      eventType: f.eventType.value.trim(),
      from: toRfc3339(f.from.value),
      to: toRfc3339(f.to.value),
      asOf: toRfc3339(f.asOf.value),
      limit: f.limit.value,
      includeSuperseded: f.includeSuperseded.checked ? 'true' : undefined,
    };
  }

  function statusBadge(status) {
    return el('span', { className: 'status status-' + String(status), text: status });
  }

  function openButton(id, label) {
    return el('button', { type: 'button', className: 'link open-event', dataset: { eventId: id }, text: label || 'history', onclick: () => openEvent(id) });
  }

  async function loadTimeline(cursor) {
    const params = cursor ? timelineState.params : timelineParams();
    timelineState.params = params;
    const box = $('timeline-problem');
    try {
      const page = await api('GET', '/v1/timeline' + qs(Object.assign({}, params, { cursor: cursor || undefined })));
      timelineState.lastError = null;
      showProblem(box, null);
      timelineState.cursor = cursor;
      timelineState.next = page.nextCursor || null;
      const body = $('timeline-rows');
      clear(body);
      for (const e of page.events) {
        const summary = el('td', { className: 'summary' }, el('span', { text: e.summary }));
        if (e.contentWarnings && e.contentWarnings.length) {
          summary.append(el('div', { className: 'warn', text: 'treat as data: ' + e.contentWarnings.join(', ') }));
        }
        if (e.supersededBy) summary.append(el('div', { className: 'hint', text: 'superseded by ' + e.supersededBy }));
        body.append(el('tr', { dataset: { eventId: e.eventId } },
          timeCell(e.occurredAt),
          timeCell(e.recordedAt),
          el('td', { text: e.eventType }),
          el('td', { text: e.actorId }),
          el('td', { text: e.projectId || '' }),
          el('td', null, statusBadge(e.status)),
          summary,
          el('td', null, openButton(e.eventId))));
      }
      if (!page.events.length) body.append(el('tr', null, el('td', { colSpan: 8, className: 'empty', text: 'No events in this scope.' })));
      $('timeline-info').textContent = page.events.length + ' event(s)' + (cursor ? ' (later page)' : '');
      $('timeline-next').hidden = !timelineState.next;
      $('timeline-first').hidden = !cursor;
      return true;
    } catch (e) {
      timelineState.lastError = e;
      showProblem(box, e);
      return false;
    }
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

  function breakdownView(hit) {
    const b = hit.scoreBreakdown || {};
    const bar = el('div', { className: 'bar', title: 'score ' + fmtScore(hit.score) });
    for (const c of COMPONENTS) {
      const v = Math.max(0, Number(b[c]) || 0);
      const seg = el('span', { className: 'seg ' + c, title: c + ' ' + fmtScore(v) });
      seg.style.width = (Math.min(1, v) * 100).toFixed(2) + '%'; // CSSOM, allowed by the CSP
      bar.append(seg);
    }
    const table = el('table', { className: 'breakdown' },
      el('thead', null, el('tr', null, el('th', { text: 'component' }), el('th', { text: 'contribution' }), el('th', { text: 'why' }))));
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
    for (const c of COMPONENTS) {
      tbody.append(el('tr', { className: 'component-' + c },
        el('td', null, el('i', { className: 'sw ' + c }), c),
        el('td', { className: 'mono num', text: fmtScore(b[c]) }),
        el('td', { className: 'hint', text: why[c] })));
    }
    tbody.append(el('tr', { className: 'total' },
      el('td', { text: 'score' }), el('td', { className: 'mono num', text: fmtScore(hit.score) }), el('td', { className: 'hint', text: 'sum of the contributions' })));
    table.append(tbody);
    return el('div', { className: 'why' }, bar, table);
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
      resp.results.forEach((hit, i) => {
        const e = hit.event;
        const head = el('div', { className: 'hit-head' },
          el('span', { className: 'rank', text: '#' + (i + 1) }),
          el('span', { className: 'score mono', text: 'score ' + fmtScore(hit.score) }),
          statusBadge(e.status),
          hit.stale ? el('span', { className: 'status status-stale', text: 'stale' + (hit.staleBy ? ' (newer: ' + hit.staleBy + ')' : '') }) : null,
          openButton(e.eventId, 'history'));
        const meta = el('div', { className: 'meta' },
          el('span', null, 'occurredAt ', el('code', { text: e.occurredAt })),
          el('span', null, 'recordedAt ', el('code', { text: e.recordedAt })),
          el('span', { text: e.eventType }),
          el('span', { text: 'actor ' + e.actorId }),
          e.projectId ? el('span', { text: 'project ' + e.projectId }) : null,
          el('span', { className: 'mono', text: e.eventId }));
        const li = el('li', { className: 'hit card', dataset: { eventId: e.eventId } },
          head, el('p', { className: 'summary', text: e.summary }), meta, breakdownView(hit));
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
    $('timeline-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadTimeline(null); });
    $('timeline-next').addEventListener('click', () => loadTimeline(timelineState.next));
    $('timeline-first').addEventListener('click', () => loadTimeline(null));
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
      loadTimeline(null);
      refreshReviewCount();
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
