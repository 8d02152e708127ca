// ejob console page: a client of the console's REST API (/api/...). Every
// name that comes from ZooKeeper is put into the page as text, never as HTML.
'use strict';

const state = { session: null, registries: [], registry: null, timer: null, connected: true };
const POLL_MS = 1500; // live views refresh well within 2 s

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'onclick' || k === 'oninput' || k === 'onchange' || k === 'onsubmit') e[k] = v;
    else if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// Replace node's children; null entries (e.g. buttons a guest does not get) are left out.
function put(node, ...kids) {
  node.replaceChildren(...kids.flat().filter(k => k !== null && k !== undefined));
}

function flash(text, good) {
  const f = document.getElementById('flash');
  f.textContent = text;
  f.className = good ? 'ok' : 'bad';
}

async function api(method, path, body) {
  const headers = { 'Accept': 'application/json' };
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    if (state.session) headers['X-CSRF-Token'] = state.session.csrfToken;
  }
  const res = await fetch(path, {
    method, headers, credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await res.json(); } catch (e) { data = { error: 'bad reply from the console' }; }
  if (res.status === 401 && path !== '/api/login') {
    state.session = null;
    showLogin();
  }
  return { status: res.status, data };
}

function regPath(rest) {
  return '/api/registries/' + encodeURIComponent(state.registry) + rest;
}

function enc(s) { return encodeURIComponent(s); }

// A link of the page, with the registry shown in it (#/r/REG/job/X), so
// that it means the same job whatever registry the reader has chosen.
function link(path) {
  return '#/r/' + enc(state.registry || '') + path;
}

// ZooKeeper of the registry shown is up (true) or not: a banner, and no
// operation buttons while it is down (what the page shows may be stale).
function setConnected(up) {
  if (up === undefined || state.connected === up) return;
  state.connected = up;
  const b = document.getElementById('zk-banner');
  b.hidden = up;
  b.textContent = up ? '' : 'ZooKeeper of registry ' + state.registry +
    ' is not reachable: what is shown may be out of date, and operations are disabled until it is back.';
  for (const btn of document.querySelectorAll('button.op')) btn.disabled = !up;
}

function statusBadge(s) { return el('span', { class: 'status status-' + s }, s); }

// Every operation asks first; resolve(true) when confirmed.
function confirmDialog(text, detail) {
  return new Promise(resolve => {
    const box = document.getElementById('confirm');
    document.getElementById('confirm-text').textContent = text;
    document.getElementById('confirm-detail').textContent = detail || '';
    box.hidden = false;
    const done = v => { box.hidden = true; resolve(v); };
    document.getElementById('confirm-ok').onclick = () => done(true);
    document.getElementById('confirm-cancel').onclick = () => done(false);
  });
}

async function operate(question, method, path, body, after) {
  if (!(await confirmDialog(question))) return;
  const r = await api(method, path, body);
  if (r.status === 200) flash(question.replace(/\?$/, '') + ': done', true);
  else flash(r.data.error || ('failed: HTTP ' + r.status), false);
  if (after) after();
}

// The role on the registry shown (roles per registry; role elsewhere).
function roleHere() {
  const s = state.session;
  if (!s) return 'viewer';
  return (s.roles && s.roles[state.registry]) || s.role;
}
function isAdmin() { return roleHere() === 'admin'; }
function canOperate() { return roleHere() === 'admin' || roleHere() === 'operator'; }

// The page shows one view at a time, and each route() (or the login form)
// starts a new one. An async view whose request answers after another view
// started (a slow answer, the reload after a save) must not draw over it.
let viewSeq = 0;
const viewIs = seq => seq === viewSeq;

function stopPolling() {
  if (state.timer) clearInterval(state.timer);
  state.timer = null;
}

function poll(fn) {
  stopPolling();
  fn();
  state.timer = setInterval(fn, POLL_MS);
}

// ------------------------------------------------------------ login

function showLogin() {
  viewSeq++;
  stopPolling();
  document.getElementById('nav').hidden = true;
  document.getElementById('logout').hidden = true;
  document.getElementById('who').textContent = '';
  const user = el('input', { id: 'login-user', autocomplete: 'username' });
  const pass = el('input', { id: 'login-password', type: 'password', autocomplete: 'current-password' });
  const msg = el('p', { class: 'error', id: 'login-error' });
  const form = el('form', { class: 'login', id: 'login-form' },
    el('h1', {}, 'Log in'),
    el('label', {}, 'User', user),
    el('label', {}, 'Password', pass),
    el('button', { type: 'submit', id: 'login-submit' }, 'Log in'), msg);
  form.onsubmit = async ev => {
    ev.preventDefault();
    const r = await api('POST', '/api/login', { user: user.value, password: pass.value });
    if (r.status !== 200) { msg.textContent = r.data.error; return; }
    state.session = r.data;
    await start();
  };
  put(document.getElementById('view'), form);
}

// The job list is in jobs.js, times in times.js.

// ------------------------------------------------------------ one job

function opButton(label, id, question, method, path, body, refresh, danger, need) {
  if (need === 'admin' ? !isAdmin() : !canOperate()) return null;
  return el('button', { id, class: danger ? 'op danger' : 'op', disabled: !state.connected,
    onclick: () => operate(question, method, path, body, refresh) }, label);
}

function jobView(job) {
  const jp = '/jobs/' + enc(job);
  const head = el('div', { id: 'job-head' });
  const ops = el('div', { class: 'ops', id: 'job-ops' });
  const servers = el('tbody', { id: 'servers-body' });
  const instances = el('tbody', { id: 'instances-body' });
  const items = el('tbody', { id: 'items-body' });
  const tbl = (id, headers, tbody) => el('table', { id },
    el('thead', {}, el('tr', {}, headers.map(h => el('th', {}, h)))), tbody);
  put(document.getElementById('view'), 
    el('h1', {}, 'Job ', el('span', { id: 'job-name' }, job)), head, ops,
    el('h2', {}, 'Servers'), tbl('servers', ['Server', 'State', 'Instances', ''], servers),
    el('h2', {}, 'Instances'), tbl('instances', ['Instance', 'Server', 'Leader', 'Trigger', ''], instances),
    el('h2', {}, 'Items'), tbl('items', ['Item', 'Instance', 'Status', 'Running', 'Failover',
      'Misfire', 'Disabled', 'Parameter', ''], items));
  const refresh = async () => {
    const r = await api('GET', regPath(jp));
    if (r.status !== 200) { put(head, el('p', { class: 'error' }, r.data.error)); return; }
    const j = r.data;
    setConnected(j.connected);
    const waiting = j.items.filter(it => it.failoverWaiting).map(it => it.item);
    put(head, el('p', {}, 'Status ', statusBadge(j.status), '  cron ', j.cron || '?',
      '  type ', j.jobType || '?', '  leader ', j.leader ? j.leader + (j.leaderLive ? '' : ' (gone)') : '-'),
      j.configError ? el('p', { class: 'error', id: 'job-config-error' }, 'Config error: ' + j.configError) : null,
      (j.javaInstances || []).length ? el('p', { class: 'error', id: 'job-java-note' },
        'Java instances ' + j.javaInstances.join(', ') + ' ignore ' + j.javaIgnores.join(', ') +
        ' (a Java leader shards with AverageAllocation, fires in its own time zone)') : null,
      el('dl', { class: 'run', id: 'job-times' },
        el('dt', {}, 'Time zone'), el('dd', { id: 'job-zone' }, j.timeZone ? j.timeZone +
          (j.timeZoneAssumed ? ' (no timeZone set: each daemon fires in its host\'s zone; the console\'s shown)' : '') : '?'),
        el('dt', {}, 'Last fire'), el('dd', { id: 'job-last-fire' }, j.lastFire ? fmtTime(j.lastFire, j.timeZone) : '- (none recorded)'),
        el('dt', {}, 'Next fires'), el('dd', { id: 'job-next-fires' },
          (j.nextFires || []).length ? el('ol', {}, j.nextFires.map(t => el('li', {}, fmtTime(t, j.timeZone)))) : '-')),
      j.failoverItemsWaiting ? el('p', { class: 'error', id: 'job-failover-waiting' },
        j.failoverItemsWaiting + ' item(s) waiting for failover' + (waiting.length ? ': ' + waiting.join(', ') : '') +
        ' (their instance died; a live instance with failover on runs them at its next fire)') : null,
      shutDownNote(j, job, refresh));
    put(ops, 
      opButton('Trigger', 'op-trigger', 'Trigger ' + job + ' on every live instance?', 'POST', regPath(jp + '/trigger'), {}, refresh),
      opButton('Disable', 'op-disable', 'Disable ' + job + ' on every server?', 'POST', regPath(jp + '/disable'), {}, refresh),
      opButton('Enable', 'op-enable', 'Enable ' + job + ' on every server?', 'POST', regPath(jp + '/enable'), {}, refresh),
      opButton('Shut down', 'op-shutdown', 'Shut down every instance of ' + job + '?', 'POST', regPath(jp + '/shutdown'), {}, refresh, true),
      opButton('Kill', 'op-kill', 'Kill every running item of ' + job + ' (SIGTERM, then SIGKILL after its grace)?', 'POST', regPath(jp + '/kill'), {}, refresh, true, 'admin'),
      opButton('Remove', 'op-remove', 'Remove ' + job + ' from the registry?', 'DELETE', regPath(jp), undefined, refresh, true, 'admin'),
      el('a', { href: link('/job/' + enc(job) + '/config'), id: 'op-config' }, isAdmin() ? 'Edit config' : 'Config'), ' ',
      el('a', { href: link('/job/' + enc(job) + '/history'), id: 'op-history' }, 'History'), ' ',
      el('a', { href: link('/job/' + enc(job) + '/fires'), id: 'op-fires' }, 'Fires'));
    put(servers, ...j.servers.map(s => el('tr', { 'data-ip': s.ip },
      el('td', {}, s.ip), el('td', {}, serverState(s)), el('td', {}, s.instanceCount),
      el('td', { class: 'ops' }, s.disabled
        ? opButton('Enable', null, 'Enable ' + job + ' on ' + s.ip + '?', 'POST', regPath(jp + '/enable'), { server: s.ip }, refresh)
        : opButton('Disable', null, 'Disable ' + job + ' on ' + s.ip + '?', 'POST', regPath(jp + '/disable'), { server: s.ip }, refresh)))));
    put(instances, ...j.instances.map(i => el('tr', { 'data-instance': i.instanceId },
      el('td', {}, i.instanceId), el('td', {}, i.serverIp), el('td', {}, i.leader ? 'yes' : ''),
      el('td', {}, i.triggerPending ? 'pending' : ''),
      el('td', { class: 'ops' },
        opButton('Trigger', null, 'Trigger ' + job + ' on ' + i.instanceId + '?', 'POST', regPath(jp + '/trigger'), { instance: i.instanceId }, refresh),
        opButton('Shut down', null, 'Shut down ' + i.instanceId + '?', 'POST', regPath(jp + '/shutdown'), { instance: i.instanceId }, refresh, true)))));
    put(items, ...j.items.map(it => el('tr', { 'data-item': it.item },
      el('td', {}, it.item), el('td', { class: 'owner' }, it.instanceId ? it.instanceId + (it.ownerLive ? '' : ' (gone)') : '-'),
      el('td', {}, statusBadge(it.failoverWaiting ? 'FAILOVER_WAITING' : it.status)), el('td', {}, it.running ? 'yes' : ''), el('td', {}, it.failover || ''),
      el('td', {}, it.misfire ? 'yes' : ''), el('td', {}, it.disabled ? 'yes' : ''), el('td', {}, it.parameter || ''),
      el('td', { class: 'ops' }, it.disabled
        ? opButton('Enable', null, 'Enable item ' + it.item + ' of ' + job + '?', 'POST', regPath(jp + '/items/' + it.item + '/enable'), {}, refresh)
        : opButton('Disable', null, 'Disable item ' + it.item + ' of ' + job + '?', 'POST', regPath(jp + '/items/' + it.item + '/disable'), {}, refresh),
        it.running ? opButton('Kill', null, 'Kill item ' + it.item + ' of ' + job + ' now?', 'POST', regPath(jp + '/kill'), { item: it.item }, refresh, true, 'admin') : null))));
  };
  poll(refresh);
}

// ------------------------------------------------------------ config

// The config form is generated from the field table (form.js).
function configView(job) { return ejConfigForm(job); }

// ------------------------------------------------------------ history
// Runs from the history store (GET /api/history). Output and failure causes
// are whatever the jobs printed: they go into the page as text only.

function runResult(e) {
  if (!e.completed) return e.instanceLive === false ? 'died (instance gone)' : 'running';
  if (e.result === 'killed') return 'killed' + (e.killedBy ? ' by ' + e.killedBy : '');
  if (e.result === 'timeout') return 'timed out';
  if (e.success) return 'ok';
  if (e.signal) return 'FAILED signal ' + e.signal;
  if (e.exitCode) return 'FAILED exit ' + e.exitCode;
  if (e.httpStatus) return 'FAILED http ' + e.httpStatus;
  return 'FAILED';
}

// The time zone of a job of the registry shown (null: unknown), asked once.
const jobZones = new Map();
async function jobZone(job) {
  const key = state.registry + '/' + job;
  if (!jobZones.has(key)) {
    const r = await api('GET', regPath('/jobs/' + enc(job)));
    jobZones.set(key, r.status === 200 ? r.data.timeZone : null);
  }
  return jobZones.get(key);
}

function runDuration(e) {
  if (!e.completed || e.durationMs === null) return '-';
  return e.durationMs < 10000 ? e.durationMs + 'ms' : (e.durationMs / 1000).toFixed(1) + 's';
}

function historyMessage(r) {
  return el('p', { class: r.status === 404 && r.data.configured === false ? 'muted' : 'error',
    id: 'history-message' }, r.data.error || ('failed: HTTP ' + r.status));
}

// Runs newest first, a page at a time: "Older" / "Newer" follow the cursors
// of the reply (a page stays put while newer runs arrive).
function historyView(job) {
  const seq = viewSeq;
  const field = (id, label, placeholder, value) => {
    const input = el('input', { id, placeholder, value: value || '' });
    return { input, label: el('label', { for: id }, label + ' ', input) };
  };
  const f = {
    job: field('history-job', 'Job', 'job name', job),
    since: field('history-since', 'Since', '2h, 2026-01-01 10:00'),
    until: field('history-until', 'Until', '2026-01-01 12:00'),
    item: field('history-item', 'Item', '0'),
    instance: field('history-instance', 'Instance', 'IP@-@PID'),
    q: field('history-q', 'Output contains', 'text printed'),
  };
  const limit = el('input', { id: 'history-limit', type: 'number', min: 1, max: 1000, value: 50 });
  const failed = el('input', { type: 'checkbox', id: 'history-failed' });
  const out = el('div', { id: 'history-out' });
  const body = el('tbody', { id: 'history-body' });
  const table = el('table', { id: 'history' },
    el('thead', {}, el('tr', {}, ['Started', 'Job', 'Item', 'Instance', 'Source', 'Result',
      'Duration', 'Run'].map(h => el('th', {}, h)))), body);
  let cursor = null; // { before } or { after }: the page shown; null: the newest
  let last = null;
  const older = el('button', { id: 'history-older', type: 'button', onclick: () => { cursor = { before: last.older }; poll(refresh); } }, 'Older ›');
  const newer = el('button', { id: 'history-newer', type: 'button', onclick: () => { cursor = { after: last.newer }; poll(refresh); } }, '‹ Newer');
  const newest = el('button', { id: 'history-newest', type: 'button', onclick: () => { cursor = null; poll(refresh); } }, '« Newest');
  const query = () => {
    const q = new URLSearchParams();
    for (const [k, x] of Object.entries(f)) if (x.input.value.trim()) q.set(k, x.input.value.trim());
    if (limit.value) q.set('limit', limit.value);
    if (failed.checked) q.set('failed', 'true');
    if (cursor && cursor.before) q.set('before', cursor.before);
    if (cursor && cursor.after) q.set('after', cursor.after);
    if (state.registry) q.set('registry', state.registry);
    return '/api/history?' + q.toString();
  };
  const refresh = async () => {
    const asked = query();
    const r = await api('GET', asked);
    const zone = f.job.input.value.trim() ? await jobZone(f.job.input.value.trim()) : null;
    // An answer to a page no longer asked for (a poll sent before Older,
    // Newer or a search, answered after: a slow server) would put that
    // page back, and the next Older would page from it.
    if (!viewIs(seq) || asked !== query()) return;
    if (r.status !== 200) { put(out, historyMessage(r)); return; }
    last = r.data;
    older.disabled = !last.older;
    newer.disabled = !last.newer;
    newest.disabled = !cursor;
    put(body, ...r.data.executions.map(e => el('tr', { 'data-run': e.id, class: e.completed && !e.success ? 'failed' : null },
      el('td', {}, fmtTime(e.start, zone)), el('td', {}, el('a', { href: link('/job/' + enc(e.job)) }, e.job)),
      el('td', {}, e.item), el('td', {}, e.instance || e.ip), el('td', {}, e.source),
      el('td', { class: 'result' }, runResult(e)), el('td', {}, runDuration(e)),
      el('td', {}, el('a', { href: link('/run/' + enc(e.id)), class: 'run-link' }, e.id.slice(0, 8))))));
    put(out, el('p', { class: 'muted', id: 'history-count' },
      r.data.executions.length + ' runs (newest first, ' + r.data.limit + ' a page) from ' + r.data.store),
      el('div', { class: 'pager' }, newest, newer, older), table);
  };
  const form = el('form', { class: 'filters', id: 'history-filters' }, Object.values(f).map(x => x.label),
    el('label', { for: 'history-limit' }, 'Per page ', limit),
    el('label', {}, failed, ' failed only'), el('button', { type: 'submit', id: 'history-search' }, 'Search'));
  form.onsubmit = ev => { ev.preventDefault(); cursor = null; poll(refresh); };
  put(document.getElementById('view'), el('h1', {}, job ? 'History of ' + job : 'History'), form, out,
    job ? el('a', { href: link('/job/' + enc(job)) }, 'Back to the job') : null);
  poll(refresh);
}

async function runView(id) {
  stopPolling();
  const seq = viewSeq;
  const view = document.getElementById('view');
  const r = await api('GET', '/api/history/' + enc(id));
  const zone = r.status === 200 ? await jobZone(r.data.job) : null;
  if (!viewIs(seq)) return;
  if (r.status !== 200) { put(view, el('h1', {}, 'Run ', id), historyMessage(r)); return; }
  const e = r.data;
  const runTime = t => fmtTime(t, zone);
  const row = (k, v) => [el('dt', {}, k), el('dd', {}, v === null || v === undefined || v === '' ? '-' : v)];
  const stream = (name, text, binary, cut) => [
    el('h2', {}, name, el('span', { class: 'muted' }, (binary ? '  (not text: bytes shown as \\xNN)' : '') +
      (cut ? '  (cut at the cap)' : ''))),
    el('pre', { class: 'output', id: 'run-' + name }, text === null ? '(none)' : text)];
  put(view, el('h1', {}, 'Run ', el('span', { id: 'run-id' }, e.id)),
    el('dl', { class: 'run', id: 'run-fields' },
      row('Job', el('a', { href: link('/job/' + enc(e.job) + '/history') }, e.job)), row('Item', e.item),
      row('Instance', e.instance), row('Host', e.hostname + ' (' + e.ip + ')'), row('Task', e.taskId),
      row('Source', e.source), row('Started', runTime(e.start)), row('Ended', runTime(e.complete)),
      row('Duration', runDuration(e)), row('Result', el('span', { id: 'run-result' }, runResult(e))),
      row('Fencing token', e.fencingToken)),
    e.failureCause ? [el('h2', {}, 'Failure'), el('pre', { class: 'output', id: 'run-failure' }, e.failureCause)] : null,
    el('h2', {}, 'Status trail'),
    el('table', { id: 'run-trail' }, el('thead', {}, el('tr', {}, ['Time', 'State', 'Items', 'Server', 'Message'].map(h => el('th', {}, h)))),
      el('tbody', {}, e.statusTrail.map(s => el('tr', {}, el('td', {}, runTime(s.time)), el('td', {}, s.state),
        el('td', {}, s.shardingItem), el('td', {}, s.slaveId), el('td', {}, el('pre', {}, s.message || '')))))),
    stream('stdout', e.stdout, e.stdoutBinary, e.stdoutTruncated),
    stream('stderr', e.stderr, e.stderrBinary, e.stderrTruncated),
    el('a', { href: link('/history') }, 'All history'));
  if (!e.completed) followRun(e, seq); // live.js
}

// ------------------------------------------------------------ fires
// The job's fire ledger (GET .../jobs/J/fires) as `ejob fires` prints it: a
// row per fire time, a column per item, who ran it or a code for why not.

const RESULT_MARK = { failed: '!', running: '~', unknown: '?' };

function firesGrid(rows) {
  const items = [...new Set(rows.filter(r => r.item >= 0).map(r => r.item))].sort((a, b) => a - b);
  if (!items.length) items.push(-1);
  const lines = [];
  for (const r of rows) {
    const last = lines[lines.length - 1];
    // A fire time caught up after a takeover (CATCHUP) stays on its cron line.
    const kind = r.kind === 'CATCHUP' ? 'CRON' : r.kind;
    if (last && last.at === r.fireTimeMs && last.kind === kind) last.rows.push(r);
    else lines.push({ at: r.fireTimeMs, kind, time: r.fireTime, rows: [r] });
  }
  const legend = [];
  const code = r => {
    let i = legend.findIndex(x => x.reason === r.reason);
    if (i < 0) { legend.push({ reason: r.reason, why: r.why, who: new Set() }); i = legend.length - 1; }
    if (r.instance) legend[i].who.add(r.instance);
    return '-' + String.fromCharCode(97 + (i % 26));
  };
  for (const ln of lines) {
    ln.cells = items.map(it => {
      const r = ln.rows.find(x => x.item === it) || ln.rows.find(x => x.item === -1);
      if (!r) return { text: ln.kind === 'CRON' ? '?' : '', gap: ln.kind === 'CRON' };
      if (r.ran) return { text: r.instance.split('@-@')[0] + (r.kind === 'CATCHUP' ? '^' : '') + (RESULT_MARK[r.result] || ''), run: r.executionId,
        failed: r.result === 'failed' };
      return { text: code(r), gap: true, reason: r.reason };
    });
    ln.gap = ln.cells.some(c => c.gap);
  }
  return { items, lines, legend };
}

function firesView(job) {
  const since = el('input', { id: 'fires-since', placeholder: 'since (2h, 2026-01-01 10:00)', value: '2h' });
  const until = el('input', { id: 'fires-until', placeholder: 'until' });
  const gaps = el('input', { type: 'checkbox', id: 'fires-gaps' });
  const out = el('div', { id: 'fires-out' });
  const refresh = async () => {
    const q = new URLSearchParams();
    if (since.value.trim()) q.set('since', since.value.trim());
    if (until.value.trim()) q.set('until', until.value.trim());
    const r = await api('GET', regPath('/jobs/' + enc(job) + '/fires?' + q.toString()));
    if (r.status !== 200) { put(out, historyMessage(r)); return; }
    const g = firesGrid(r.data.fires);
    const shown = g.lines.filter(ln => !gaps.checked || ln.gap);
    const zone = await jobZone(job);
    const time = ln => fmtTime(ln.time, zone) + (ln.kind === 'CRON' ? '' : ' ' + ln.kind);
    put(out, el('p', { class: 'muted', id: 'fires-count' }, shown.length + ' fire times from ' + r.data.store),
      el('table', { id: 'fires' },
        el('thead', {}, el('tr', {}, el('th', {}, 'Fire'), g.items.map(i => el('th', {}, i < 0 ? 'Items' : 'Item ' + i)))),
        el('tbody', {}, shown.map(ln => el('tr', { 'data-fire': ln.at, class: ln.gap ? 'gap' : null }, el('td', {}, time(ln)),
          ln.cells.map(c => el('td', { class: c.gap ? 'not-run' : (c.failed ? 'failed' : null), 'data-reason': c.reason || null },
            c.run ? el('a', { href: link('/run/' + enc(c.run)), class: 'run-link' }, c.text) : c.text)))))),
      g.legend.length === 0 && !g.lines.some(ln => ln.cells.some(c => c.text === '?')) ? null :
      el('dl', { class: 'run', id: 'fires-legend' }, g.legend.map((x, i) => [
        el('dt', {}, '-' + String.fromCharCode(97 + (i % 26))),
        el('dd', {}, x.reason + ': ' + x.why + (x.who.size ? ' (' + [...x.who].join(', ') + ')' : ''))]),
      g.lines.some(ln => ln.cells.some(c => c.text === '?')) ? [el('dt', {}, '?'), el('dd', {}, 'no record: no instance ran or reported it (its owner may have died before its session expired)')] : null),
      el('p', { class: 'muted' }, 'After an instance: ! failed, ~ still running (or its instance died in it), ? result gone.'));
  };
  const form = el('form', { class: 'filters', id: 'fires-filters' }, since, until,
    el('label', {}, gaps, ' only fire times with an item not run'), el('button', { type: 'submit', id: 'fires-search' }, 'Show'));
  form.onsubmit = ev => { ev.preventDefault(); poll(refresh); };
  gaps.onchange = () => poll(refresh);
  put(document.getElementById('view'), el('h1', {}, 'Fires of ' + job), form, out,
    el('a', { href: link('/job/' + enc(job)) }, 'Back to the job'));
  poll(refresh);
}

// ------------------------------------------------------------ servers

function serversView() {
  const body = el('div', { id: 'servers-list' });
  put(document.getElementById('view'), el('h1', {}, 'Servers'), body);
  const refresh = async () => {
    const r = await api('GET', regPath('/servers'));
    if (r.status !== 200) { put(body, el('p', { class: 'error' }, r.data.error)); return; }
    put(body, ...r.data.map(s => el('section', { 'data-ip': s.ip },
      el('h2', {}, s.ip, el('span', { class: 'muted' }, '  ' + s.instanceCount + ' instances, ' +
        s.jobCount + ' jobs, ' + s.disabledJobCount + ' disabled')),
      el('div', { class: 'ops' },
        opButton('Disable all', null, 'Disable every job on ' + s.ip + '?', 'POST', regPath('/servers/' + enc(s.ip) + '/disable'), {}, refresh),
        opButton('Enable all', null, 'Enable every job on ' + s.ip + '?', 'POST', regPath('/servers/' + enc(s.ip) + '/enable'), {}, refresh),
        opButton('Shut down all', null, 'Shut down every job instance on ' + s.ip + '?', 'POST', regPath('/servers/' + enc(s.ip) + '/shutdown'), {}, refresh, true)),
      el('table', {}, el('thead', {}, el('tr', {}, ['Job', 'On this server', 'Instances here', 'Job status'].map(h => el('th', {}, h)))),
        el('tbody', {}, s.jobs.map(j => el('tr', {},
          el('td', {}, el('a', { href: link('/job/' + enc(j.jobName)) }, j.jobName)),
          el('td', {}, statusBadge(j.disabled ? 'DISABLED' : 'ENABLED')), el('td', {}, j.instanceCount),
          el('td', {}, statusBadge(j.jobStatus)))))))));
  };
  poll(refresh);
}

// ------------------------------------------------------------ routing

// #/r/REG/job/X (the registry in the link), or #/job/X and the like
// (links from before: the registry chosen in the page).
function route() {
  if (!state.session) return showLogin();
  viewSeq++;
  let parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'r' && parts.length >= 2) {
    if (state.registries.some(x => x.name === parts[1]) && parts[1] !== state.registry) {
      state.registry = parts[1];
      document.getElementById('registry').value = state.registry;
      showWho();
      pollRegistries();
    }
    parts = parts.slice(2);
  }
  for (const a of document.querySelectorAll('#nav a')) a.classList.remove('active');
  for (const [id, path] of [['nav-jobs', '/jobs'], ['nav-servers', '/servers'], ['nav-history', '/history']])
    document.getElementById(id).setAttribute('href', link(path));
  if (parts[0] === 'job' && parts[1]) {
    if (parts[2] === 'config') return configView(parts[1]);
    if (parts[2] === 'history') return historyView(parts[1]);
    if (parts[2] === 'fires') return firesView(parts[1]);
    return jobView(parts[1]);
  }
  if (parts[0] === 'run' && parts[1]) return runView(parts[1]);
  if (parts[0] === 'history') {
    document.getElementById('nav-history').classList.add('active');
    return historyView(parts[1] || '');
  }
  if (parts[0] === 'servers') {
    document.getElementById('nav-servers').classList.add('active');
    return serversView();
  }
  document.getElementById('nav-jobs').classList.add('active');
  return jobsView();
}

function showWho() {
  document.getElementById('who').textContent = state.session.user + ' (' + roleHere() + ')';
}

// Whether the registry shown reaches its ZooKeeper, every few seconds
// (the job views also say it with each refresh).
let registriesTimer = null;
async function pollRegistries() {
  clearTimeout(registriesTimer);
  const r = await api('GET', '/api/registries');
  if (r.status === 200) {
    state.registries = r.data;
    const here = r.data.find(x => x.name === state.registry);
    if (here) setConnected(here.connected);
  }
  if (state.session) registriesTimer = setTimeout(pollRegistries, 3000);
}

async function start() {
  const s = await api('GET', '/api/session');
  if (s.status !== 200) return showLogin();
  state.session = s.data;
  const r = await api('GET', '/api/registries');
  state.registries = r.status === 200 ? r.data : [];
  const sel = document.getElementById('registry');
  put(sel, ...state.registries.map(x =>
    el('option', { value: x.name }, x.name + ' (' + x.servers + '/' + x.namespace + ')')));
  state.registry = state.registry || (state.registries[0] && state.registries[0].name);
  sel.value = state.registry;
  sel.onchange = () => { location.hash = '#/r/' + enc(sel.value) + '/jobs'; };
  document.getElementById('nav').hidden = false;
  put(document.getElementById('times-switch'), zoneSwitch(route));
  showWho();
  const out = document.getElementById('logout');
  out.hidden = state.session.noAuth;
  out.onclick = async () => { await api('POST', '/api/logout', {}); state.session = null; showLogin(); };
  pollRegistries();
  route();
}

// A notice belongs to the page it was given on: another page starts without it.
window.addEventListener('hashchange', () => { flash('', true); route(); });
start();
