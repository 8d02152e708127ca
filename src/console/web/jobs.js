// ejob console page: the job list. Filtered, sorted and paged by the
// server (GET .../jobs?offset=&limit=&sort=&order=&q=&status=&errors=); each
// poll sends the list's last ETag back, so an unchanged page costs a 304.
'use strict';

const JOBS_PAGE = 50;

// GET with If-None-Match: {status, data, etag}; a 304 gives the data kept.
async function apiCached(path, cache) {
  const headers = { 'Accept': 'application/json' };
  if (cache.etag && cache.path === path) headers['If-None-Match'] = cache.etag;
  const res = await fetch(path, { headers, credentials: 'same-origin', cache: 'no-store' });
  if (res.status === 304) return { status: 200, data: cache.data, unchanged: true };
  let data = null;
  try { data = await res.json(); } catch (e) { data = { error: 'bad reply from the console' }; }
  if (res.status === 401) { state.session = null; showLogin(); }
  if (res.status === 200) Object.assign(cache, { path, etag: res.headers.get('ETag'), data });
  return { status: res.status, data };
}

const JOB_SORTS = { Job: 'name', Status: 'status', Instances: 'instances', 'Next fire': 'nextFire', Type: 'type' };

function serversCell(j) {
  if (!j.disabledServers) return String(j.serverCount);
  return el('span', { class: 'status status-DISABLED', title: 'disabled on ' + (j.disabledServerIps || []).join(', ') },
    j.serverCount + ' (' + j.disabledServers + ' disabled)');
}

function jobsView() {
  const seq = viewSeq;
  const text = el('input', { id: 'filter-name', placeholder: 'part of a name or description' });
  const status = el('select', { id: 'filter-status' },
    ['', 'OK', 'CRASHED', 'DISABLED', 'SHARDING_FLAG', 'LEADER_LOST'].map(s =>
      el('option', { value: s }, s === '' ? 'any status' : s)));
  const errorsOnly = el('input', { type: 'checkbox', id: 'filter-errors' });
  const body = el('tbody', { id: 'jobs-body' });
  const page = { offset: 0, sort: 'name', order: 'asc' };
  const head = el('tr', {});
  const table = el('table', { id: 'jobs' }, el('thead', {}, head), body);
  const count = el('span', { id: 'jobs-count', class: 'muted' });
  const nav = (id, label, go) => el('button', { id, type: 'button', onclick: () => { go(); refresh(); } }, label);
  let total = 0;
  const pager = el('div', { class: 'pager' },
    nav('jobs-first', '« First', () => { page.offset = 0; }),
    nav('jobs-prev', '‹ Previous', () => { page.offset = Math.max(0, page.offset - JOBS_PAGE); }),
    nav('jobs-next', 'Next ›', () => { if (page.offset + JOBS_PAGE < total) page.offset += JOBS_PAGE; }),
    nav('jobs-last', 'Last »', () => { page.offset = Math.max(0, Math.floor((total - 1) / JOBS_PAGE) * JOBS_PAGE); }),
    count);
  const drawHead = () => put(head, ['Job', 'Status', 'Cron', 'Items', 'Instances', 'Servers', 'Zone', 'Next fire',
    'Last fire', 'Leader', 'Type', 'Description', 'Config error'].map(h => {
    const key = JOB_SORTS[h];
    if (!key) return el('th', {}, h);
    const mark = page.sort === key ? (page.order === 'asc' ? ' ▲' : ' ▼') : '';
    return el('th', { class: 'sortable', 'data-sort': key, onclick: () => {
      page.order = page.sort === key && page.order === 'asc' ? 'desc' : 'asc';
      page.sort = key; page.offset = 0; refresh();
    } }, h + mark);
  }));
  const cache = {};
  const render = d => {
    total = d.total;
    setConnected(d.connected);
    drawHead();
    put(body, ...d.jobs.map(j => el('tr', { 'data-job': j.jobName },
      el('td', {}, el('a', { href: link('/job/' + enc(j.jobName)) }, j.jobName)),
      el('td', {}, statusBadge(j.status)),
      el('td', {}, j.cron === null ? '?' : j.cron),
      el('td', {}, j.shardingTotalCount),
      el('td', {}, j.instanceCount),
      el('td', { class: 'servers' }, serversCell(j)),
      el('td', { class: 'zone' }, j.timeZone ? j.timeZone + (j.timeZoneAssumed ? ' (daemon host\'s?)' : '') : '?'),
      el('td', { class: 'next-fire' }, fmtTime(j.nextFire, j.timeZone)),
      el('td', { class: 'last-fire' }, fmtTime(j.lastFire, j.timeZone)),
      el('td', {}, j.leader ? j.leader + (j.leaderLive ? '' : ' (gone)') : '-'),
      el('td', {}, j.jobType || '?'),
      el('td', {}, j.description),
      el('td', { class: 'error' }, j.configError || ''))));
    const last = Math.min(d.offset + d.jobs.length, d.total);
    count.textContent = (d.total ? (d.offset + 1) + '-' + last : '0') + ' of ' + d.total + ' jobs';
  };
  const refresh = async () => {
    const q = new URLSearchParams({ offset: page.offset, limit: JOBS_PAGE, sort: page.sort, order: page.order });
    if (text.value.trim()) q.set('q', text.value.trim());
    if (status.value) q.set('status', status.value);
    if (errorsOnly.checked) q.set('errors', 'true');
    const r = await apiCached(regPath('/jobs?' + q.toString()), cache);
    if (!viewIs(seq)) return;
    if (r.status === 200) render(r.data);
    else if (r.status !== 401) flash(r.data.error || ('failed: HTTP ' + r.status), false);
  };
  const refilter = () => { page.offset = 0; refresh(); };
  text.oninput = refilter; status.onchange = refilter; errorsOnly.onchange = refilter;
  drawHead();
  put(document.getElementById('view'),
    el('h1', {}, 'Jobs'),
    el('div', { class: 'filters' },
      el('label', { for: 'filter-name' }, 'Search ', text), el('label', { for: 'filter-status' }, 'Status ', status),
      el('label', {}, errorsOnly, ' config errors only')),
    pager, table);
  poll(refresh);
}
