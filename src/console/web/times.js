// ejob console page: times. The API gives instants with their offset
// ("2026-01-01T08:00:00.000+08:00"); the page shows them in the job's zone,
// with the zone named, or in the browser's, as the operator chose (the
// "Times in" switch in the header, kept in localStorage).
'use strict';

const ZONE_KEY = 'ejob.timesIn';
const BROWSER_ZONE = (Intl.DateTimeFormat().resolvedOptions().timeZone) || 'UTC';

function timesIn() {
  try { return localStorage.getItem(ZONE_KEY) === 'browser' ? 'browser' : 'job'; } catch (e) { return 'job'; }
}

function setTimesIn(v) {
  try { localStorage.setItem(ZONE_KEY, v); } catch (e) { /* private mode: this page only */ }
}

// The zone an instant is shown in: the job's (when known and chosen), else the browser's.
function shownZone(jobZone) {
  return timesIn() === 'job' && jobZone ? jobZone : BROWSER_ZONE;
}

const zoneFormats = new Map();
function zoneFormat(zone) {
  if (!zoneFormats.has(zone)) {
    let f;
    try {
      f = new Intl.DateTimeFormat('en-CA', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit',
        hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
    } catch (e) {
      f = null; // a zone the browser does not know: shown in the browser's
    }
    zoneFormats.set(zone, f);
  }
  return zoneFormats.get(zone);
}

// "2026-01-01 08:00:00" of an instant in zone (no zone name).
function wallTime(iso, zone) {
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  const f = zoneFormat(zone) || zoneFormat(BROWSER_ZONE);
  const p = Object.fromEntries(f.formatToParts(d).map(x => [x.type, x.value]));
  return p.year + '-' + p.month + '-' + p.day + ' ' + p.hour + ':' + p.minute + ':' + p.second;
}

// An instant as the page shows it: wall time and the zone's name.
function fmtTime(iso, jobZone) {
  if (!iso) return '-';
  const zone = shownZone(jobZone);
  return wallTime(iso, zoneFormat(zone) ? zone : BROWSER_ZONE) + ' ' + (zoneFormat(zone) ? zone : BROWSER_ZONE);
}

// The header's switch; onchange redraws the view.
function zoneSwitch(onchange) {
  const sel = el('select', { id: 'times-in', title: 'Show times in the job\'s time zone or in this browser\'s' },
    el('option', { value: 'job' }, 'job\'s zone'),
    el('option', { value: 'browser' }, 'browser (' + BROWSER_ZONE + ')'));
  sel.value = timesIn();
  sel.onchange = () => { setTimesIn(sel.value); onchange(); };
  return el('label', {}, 'Times in ', sel);
}
