// The run page of a running item in Debian's chromium, driven by
// playwright-core: its stdout grows while the item runs (lines appear a
// few at a time, each soon after the script wrote it), stderr markup stays
// text, and once the run ends the page shows its result and all 25 lines.
// Environment: CONSOLE_URL, READY_FILE (written once logged in: the test
// then starts the run),
// ARTIFACTS (screenshot directory), USER_DATA_DIR.
'use strict';
const fs = require('fs');
const path = require('path');
const { check, failed, launch, login } = require('./lib');

const url = process.env.CONSOLE_URL;

const pageState = () => {
  const pre = document.querySelector('#run-stdout');
  return {
    lines: pre ? pre.textContent.split('\n').filter(l => l.startsWith('line ')) : [],
    live: !!document.querySelector('#run-live'),
    result: (document.querySelector('#run-result') || {}).textContent || '',
    stderr: (document.querySelector('#run-stderr') || {}).innerHTML || '',
  };
};

async function main() {
  const { ctx, page } = await launch(process.env.USER_DATA_DIR);
  page.on('console', m => console.log('page console: ' + m.text()));
  await login(page, url, 'vera', 'viewer pass');
  await page.waitForSelector('#nav:not([hidden])', { timeout: 10000 });
  // Logged in: the test may start the run now (chromium takes seconds to
  // start on a busy machine, longer than a run would wait).
  fs.writeFileSync(process.env.READY_FILE, 'ready\n');
  let id = null;
  for (const until = Date.now() + 30000; !id && Date.now() < until;) {
    id = await page.evaluate(async () => {
      const r = await fetch('/api/history?job=tickJob&limit=5');
      if (r.status !== 200) return null;
      const run = (await r.json()).executions.find(e => !e.completed);
      return run ? run.id : null;
    }).catch(() => null);
    if (!id) await new Promise(r => setTimeout(r, 100));
  }
  check(!!id, 'a running run of tickJob in the history (' + id + ')');
  await page.goto(url + '/#/run/' + id);

  // Watch the page until the run has ended: how many lines it showed at
  // each look, and how long after the script wrote it each line appeared.
  const counts = [];
  const late = {};
  let s = null;
  let following = 0; // when the page was first seen following the run
  const deadline = Date.now() + 30000;
  while (Date.now() < deadline) {
    s = await page.evaluate(pageState).catch(() => null);
    if (process.env.LIVE_DEBUG) console.log(JSON.stringify(s && { n: s.lines.length, live: s.live, result: s.result }));
    if (s) {
      const now = Date.now();
      for (const l of s.lines) {
        const [, n, written] = l.split(' ');
        if (!(n in late)) late[n] = now - Number(written);
      }
      if (s.live) counts.push(s.lines.length);
      if (s.live && !following) following = now;
      if (s.live && s.lines.length > 3 && s.lines.length < 20 && counts.filter(c => c === s.lines.length).length === 1)
        await page.screenshot({ path: path.join(process.env.ARTIFACTS, 'running-' + s.lines.length + '.png'), fullPage: true });
      if (!s.live && /ok/.test(s.result)) break;
    }
    await new Promise(r => setTimeout(r, 100));
  }
  const growing = [...new Set(counts.filter(c => c > 0 && c < 25))];
  check(growing.length >= 3, 'lines appeared while the item ran, a few at a time (' + growing.join(', ') + ')');
  check(s && !s.live && /ok/.test(s.result), 'the page shows the result once the run ended (' + (s && s.result) + ')');
  check(s && s.lines.length === 25 && s.lines.every((l, i) => l.startsWith('line ' + i + ' ')),
    'all 25 lines, in order (' + (s && s.lines.length) + ')');
  check(s && /&lt;b&gt;as text&lt;\/b&gt;/.test(s.stderr), 'stderr markup shown as text');
  // Lines written once the page was following the run (those before it
  // were there when it opened).
  const written = l => Number(l.split(' ')[2]);
  const delays = (s ? s.lines : []).filter(l => written(l) > following).map(l => late[l.split(' ')[1]]);
  const worst = Math.max(...delays);
  check(delays.length > 0 && worst < 1000, 'each line shown within ' + worst + ' ms of being written');
  await page.screenshot({ path: path.join(process.env.ARTIFACTS, 'ended.png'), fullPage: true });
  await ctx.close();
  console.log(failed() + ' failure(s)');
  process.exit(failed() ? 1 : 0);
}

main().catch(e => { console.error('FAIL: ' + e.stack); process.exit(1); });
