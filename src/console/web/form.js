// ejob console page: the config form and the state of shut-down instances.
// The form is generated from the job's field table (GET /api/fields, from
// src/config/fields.h): each field's input follows its type, its help line
// is shown under it, what only Java ElasticJob instances use is folded away,
// and every problem the console's validator finds is shown at once, each at
// its field. Uses the helpers of app.js (el, put, api, regPath, ...), which
// exist by the time a view is drawn. Text from ZooKeeper goes in as text.
'use strict';

let formFields = null; // GET /api/fields, fetched once

async function loadFields() {
  if (formFields) return formFields;
  const r = await api('GET', '/api/fields');
  if (r.status !== 200) throw new Error(r.data.error || ('HTTP ' + r.status));
  formFields = r.data;
  return formFields;
}

// The stored value of a field: jobProperties keys sit inside jobProperties.
function storedValue(cfg, f) {
  if (!f.inProps) return cfg[f.key];
  return (cfg.jobProperties || {})[f.key];
}

// The jobProperties that no row knows: the "object" field shows only these.
function otherProps(cfg, fields) {
  const known = new Set(fields.filter(f => f.inProps).map(f => f.key));
  const rest = {};
  for (const [k, v] of Object.entries(cfg.jobProperties || {})) if (!known.has(k)) rest[k] = v;
  return rest;
}

function selectOf(name, choices, value, blank) {
  const opts = (blank ? [['', blank]] : []).concat(choices.map(c => [c, c]));
  // A stored value the list does not have stays selectable, so nothing is lost.
  if (value !== '' && value !== undefined && !choices.includes(value)) opts.push([value, value]);
  const s = el('select', { name }, opts.map(([v, t]) => el('option', { value: v }, t)));
  s.value = value === undefined ? '' : value;
  return s;
}

// One input for field f holding value; read(input) gives the value to send.
function inputFor(f, value, zones, cfg, fields) {
  const v = value === undefined || value === null ? f.default : value;
  if (f.type === 'boolean') {
    const i = el('input', { type: 'checkbox', name: f.name });
    i.checked = v === true;
    return [i, i => i.checked];
  }
  if (f.type === 'integer') {
    const i = el('input', { type: 'number', step: 1, name: f.name, value: v });
    // What is not a number is sent as typed, so the validator names it.
    return [i, i => (i.value.trim() !== '' && /^-?\d+$/.test(i.value.trim())) ? Number(i.value) : i.value];
  }
  // An enum whose default is "" (misfirePolicy) may stay empty.
  if (f.type === 'enum') return [selectOf(f.name, f.choices, v, f.default === '' ? '(empty)' : null), i => i.value];
  if (f.timeZone) return [selectOf(f.name, zones, v || '', "(each host's own zone)"), i => i.value];
  if (f.type === 'object') {
    const i = el('textarea', { name: f.name }, JSON.stringify(otherProps(cfg, fields), null, 2));
    return [i, i => { try { return JSON.parse(i.value); } catch (e) { return i.value; } }];
  }
  const text = v === undefined || v === null ? '' : String(v);
  const i = f.key === 'scriptCommandLine' || f.key === 'httpData' || f.key === 'description'
    ? el('textarea', { name: f.name, rows: 2 }, text)
    : el('input', { type: 'text', name: f.name, value: text });
  if (f.key === 'jobName') i.readOnly = true;
  return [i, i => i.value];
}

// The config to send: the stored one (unknown keys kept) with the form's values.
function formValue(cfg, rows) {
  const next = JSON.parse(JSON.stringify(cfg));
  for (const { f, input, read } of rows) {
    const v = read(input);
    // A field the node does not hold stays out while it keeps its default.
    if (storedValue(cfg, f) === undefined && JSON.stringify(v) === JSON.stringify(f.default)) continue;
    const props = next.jobProperties;
    const isObj = x => x !== null && typeof x === 'object' && !Array.isArray(x);
    if (f.type === 'object') {
      // Not an object: sent as typed, so the validator names it.
      next.jobProperties = isObj(v) ? Object.assign({}, v, pickProps(props, rows)) : v;
    } else if (f.inProps) {
      if (props === undefined || props === null) next.jobProperties = {};
      if (isObj(next.jobProperties)) next.jobProperties[f.key] = v;
    } else next[f.key] = v;
  }
  return next;
}

function pickProps(props, rows) {
  const out = {};
  for (const { f } of rows) if (f.inProps && props && f.key in props) out[f.key] = props[f.key];
  return out;
}

async function ejConfigForm(job) {
  stopPolling();
  const seq = viewSeq;
  const view = document.getElementById('view');
  let meta;
  try { meta = await loadFields(); } catch (e) { put(view, el('p', { class: 'error' }, 'fields: ' + e.message)); return; }
  const r = await api('GET', regPath('/jobs/' + enc(job) + '/config'));
  if (!viewIs(seq)) return;
  if (r.status !== 200) { put(view, el('p', { class: 'error' }, r.data.error)); return; }
  const cfg = r.data.config || {};
  const version = r.data.version;
  const groups = {
    main: el('div', { id: 'form-main' }),
    more: el('details', { id: 'form-more' }, el('summary', {}, 'More settings')),
    java: el('details', { id: 'form-java' }, el('summary', {}, 'Java ElasticJob fields (ejob does not use them)')),
  };
  const rows = [];
  for (const f of meta.fields) {
    const [input, read] = inputFor(f, storedValue(cfg, f), meta.timeZones, cfg, meta.fields);
    if (!isAdmin()) input.disabled = true;
    const label = el('label', { 'data-field': f.name, 'data-scope': f.scope },
      el('span', { class: 'name' }, f.name), input,
      el('span', { class: 'field-error', id: 'err-' + f.name }),
      el('span', { class: 'help', id: 'help-' + f.name }, f.help));
    rows.push({ f, input, read, label });
    groups[f.form].append(label);
  }
  const typeRow = rows.find(x => x.f.key === 'jobType');
  // Fields of another job type (scriptCommandLine for an HTTP job...) are hidden.
  const showScope = () => {
    for (const x of rows) x.label.hidden = x.f.scope !== 'ANY' && x.f.scope !== typeRow.input.value;
  };
  typeRow.input.addEventListener('change', showScope);
  showScope();
  const summary = el('ul', { class: 'error', id: 'config-errors' });
  const problems = (r.data.problems || []).length
    ? el('p', { class: 'error', id: 'config-stored-problems' }, 'Stored config is not valid: ' + r.data.problems.join('; ')) : null;
  const form = el('form', { class: 'config', id: 'config-form', novalidate: true },
    el('h1', {}, 'Config of ', job), el('p', { class: 'muted' }, 'version ' + version), problems,
    summary, groups.main, groups.more, groups.java,
    isAdmin() ? el('button', { type: 'submit', id: 'config-save' }, 'Save') : null,
    ' ', el('a', { href: link('/job/' + enc(job)) }, 'Back to the job'));
  form.onsubmit = async ev => {
    ev.preventDefault();
    const next = formValue(cfg, rows);
    const changed = Object.keys(Object.assign({}, cfg, next))
      .filter(k => JSON.stringify(next[k]) !== JSON.stringify(cfg[k]));
    if (!(await confirmDialog('Save the config of ' + job + '?',
      changed.map(k => k + ': ' + JSON.stringify(cfg[k]) + ' -> ' + JSON.stringify(next[k])).join('\n') || '(no field changed)'))) return;
    for (const x of rows) document.getElementById('err-' + x.f.name).textContent = '';
    put(summary);
    const w = await api('PUT', regPath('/jobs/' + enc(job) + '/config'), { version, config: next });
    if (!viewIs(seq)) return;
    if (w.status === 200) {
      flash('config of ' + job + (w.data.changed ? ' saved (version ' + w.data.version + ')' : ' unchanged'), true);
      ejConfigForm(job);
      return;
    }
    const errors = w.data.errors || [{ field: '', message: w.data.error || ('HTTP ' + w.status) }];
    flash(errors.length + (errors.length === 1 ? ' problem' : ' problems') + ': nothing saved', false);
    put(summary, errors.map(e => el('li', {}, (e.field ? e.field + ': ' : '') + e.message)));
    for (const e of errors) {
      const spot = document.getElementById('err-' + e.field);
      if (!spot) continue;
      spot.textContent = e.message;
      const fold = spot.closest('details');
      if (fold) fold.open = true; // a problem is never hidden in a folded group
    }
  };
  put(view, form);
}

// ------------------------------------------------------------ shut down
// An instance an operator shut down (its instance node deleted) leaves the
// job until its process restarts; an ejob daemon restarts the job on request
// (POST .../restart, `ejob start JOB --instance ID`). The job page says so
// instead of showing the server ENABLED with 0 instances.

function shutDownNote(j, job, refresh) {
  const down = j.shutDown || [];
  if (!down.length) return null;
  return el('div', { id: 'job-shutdown', class: 'error' },
    down.map(s => el('p', { 'data-shutdown': s.instanceId },
      'Instance ' + s.instanceId + ': shut down: restart needed',
      s.restartable
        ? [' ', opButton('Restart', 'op-restart', 'Restart ' + job + ' on ' + s.instanceId + '?', 'POST',
          regPath('/jobs/' + enc(job) + '/restart'), { instance: s.instanceId }, refresh)]
        : ' (no restart request is awaited: restart its process)')));
}

// The state a server row shows: a server whose instances were all shut
// down is not simply ENABLED.
function serverState(s) {
  if (s.disabled) return statusBadge('DISABLED');
  if (s.shutDownCount > 0 && s.instanceCount === 0) return el('span', { class: 'status status-SHUTDOWN' }, 'shut down: restart needed');
  return statusBadge('ENABLED');
}
