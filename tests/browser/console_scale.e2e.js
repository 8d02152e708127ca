// The console page at scale and in time, in Debian's chromium driven by
// playwright-core: 5,000 jobs paged, sorted and filtered by the server; the
// zone, next and last fire of jobs; the registry in the URL (and links from
// before it was); items waiting for failover; disabled servers; 20,000 runs
// paged by cursor; running vs died; labelled filters; output search; the
// banner and disabled buttons when ZooKeeper is down.
// Environment: CONSOLE_URL, ZK_PID (the ZooKeeper to kill at the end),
// ARTIFACTS (screenshots), USER_DATA_DIR. The browser runs in TZ=UTC.
'use strict';
const path = require('path');
const { check, failed, waitFor, launch } = require('./lib.js');

const url = process.env.CONSOLE_URL;

const shot = (page, name) => page.screenshot({ path: path.join(process.env.ARTIFACTS, name + '.png'), fullPage: true });

async function jobList(page) {
  await page.goto(url + '/#/r/scale/jobs');
  await waitFor(page, () => document.querySelector('#jobs-count').textContent === '1-50 of 5000 jobs' &&
    document.querySelectorAll('#jobs-body tr').length === 50, null, 'first page: 50 of 5000 jobs');
  await page.click('#jobs-next');
  await waitFor(page, () => document.querySelector('#jobs-count').textContent === '51-100 of 5000 jobs' &&
    document.querySelector('#jobs-body tr').dataset.job === 'job00050', null, 'next page starts at job00050');
  await page.click('#jobs-last');
  await waitFor(page, () => document.querySelector('#jobs-count').textContent === '4951-5000 of 5000 jobs' &&
    [...document.querySelectorAll('#jobs-body tr')].pop().dataset.job === 'job04999', null, 'last page ends with job04999');
  await page.click('#jobs th[data-sort="name"]');
  await waitFor(page, () => document.querySelector('#jobs-body tr').dataset.job === 'job04999' &&
    document.querySelector('#jobs-count').textContent.startsWith('1-50 '), null, 'sorted by name descending, back to page 1');
  await page.fill('#filter-name', 'job0420');
  await waitFor(page, () => document.querySelector('#jobs-count').textContent === '1-10 of 10 jobs', null, 'filtered on the server: 10 jobs');
  await page.fill('#filter-name', 'job0000');
  await waitFor(page, (a) => (document.querySelector('#jobs-body tr[data-job="' + a + '"] .servers') || {}).textContent === '1 (1 disabled)',
    'job00003', 'a disabled server shows in the list');
  await waitFor(page, () => {
    const r = document.querySelector('#jobs-body tr[data-job="job00007"]');
    return r && r.querySelector('.zone').textContent === 'America/New_York' &&
      / 03:00:00 America\/New_York$/.test(r.querySelector('.next-fire').textContent);
  }, null, 'the list shows the zone and next fire in the job\'s zone');
  await shot(page, 'jobs');
  // Times in the browser's zone instead (the browser runs in UTC).
  await page.selectOption('#times-in', 'browser');
  await waitFor(page, () => / (0[78]):00:00 UTC$/.test(document.querySelector('#jobs-body tr[data-job="job00007"] .next-fire').textContent),
    null, 'switched: the next fire in the browser\'s zone (UTC), named');
  await page.selectOption('#times-in', 'job');
}

async function jobPage(page) {
  await page.goto(url + '/#/r/scale/job/job00005');
  await waitFor(page, () => (document.querySelector('#job-zone') || {}).textContent === 'Asia/Shanghai' &&
    document.querySelectorAll('#job-next-fires li').length === 5 &&
    [...document.querySelectorAll('#job-next-fires li')].every(li => / Asia\/Shanghai$/.test(li.textContent)),
  null, 'the job page shows its zone and next 5 fires');
  await waitFor(page, () => /1 item\(s\) waiting for failover: 1/.test((document.querySelector('#job-failover-waiting') || {}).textContent || '') &&
    document.querySelector('#items-body tr[data-item="1"] .status').textContent === 'FAILOVER_WAITING',
  null, 'failover-waiting items shown (not SHARDING_FLAG)');
  check(/#\/r\/scale\/job\/job00005\/history$/.test(await page.getAttribute('#op-history', 'href')), 'links carry the registry');
  await shot(page, 'job');
}

async function registries(page) {
  await page.goto(url + '/#/r/other/jobs');
  await waitFor(page, () => document.querySelector('#registry').value === 'other' &&
    document.querySelector('#jobs-count').textContent === '1-3 of 3 jobs' &&
    !!document.querySelector('#jobs-body tr[data-job="other00001"]'), null, '#/r/other/jobs shows registry other');
  // A link from before the registry was in the URL: the one chosen.
  await page.goto(url + '/#/job/other00001');
  await waitFor(page, () => (document.querySelector('#job-name') || {}).textContent === 'other00001' && document.querySelectorAll('#items-body tr').length === 2,
    null, 'an old #/job/X link still works (registry chosen in the page)');
  await page.selectOption('#registry', 'scale');
  await waitFor(page, () => /^#\/r\/scale\/jobs$/.test(location.hash) && /of 5000 jobs$/.test((document.querySelector('#jobs-count') || {}).textContent || ''),
    null, 'choosing a registry puts it in the URL');
}

async function history(page) {
  await page.goto(url + '/#/r/scale/history');
  await waitFor(page, () => document.querySelectorAll('#history-body tr').length === 50, null, 'history: first page of 50');
  await waitFor(page, () => document.querySelector('#history-body tr[data-run="h00000"] .result').textContent === 'killed by console:alice' &&
    document.querySelector('#history-body tr[data-run="h00001"] .result').textContent === 'timed out', null, 'killed and timed-out runs say so');
  for (const [id, label] of [['history-job', 'Job'], ['history-since', 'Since'], ['history-instance', 'Instance'], ['history-q', 'Output contains']])
    check(await page.evaluate(([i, l]) => { const e = document.querySelector('label[for="' + i + '"]'); return !!e && e.textContent.trim().startsWith(l); }, [id, label]),
      'filter ' + id + ' has the label ' + label);
  await page.fill('#history-limit', '1000');
  await page.click('#history-search');
  await waitFor(page, () => document.querySelectorAll('#history-body tr').length === 1000, null, 'a page of 1000 runs');
  const seen = new Set();
  let pages = 0, last = null;
  for (;;) {
    const ids = await page.evaluate(() => [...document.querySelectorAll('#history-body tr')].map(r => r.dataset.run));
    ids.forEach(i => seen.add(i));
    pages++;
    last = ids[ids.length - 1];
    if (await page.isDisabled('#history-older')) break;
    if (pages > 30) break;
    await page.click('#history-older');
    await waitFor(page, (prev) => document.querySelector('#history-body tr').dataset.run !== prev, ids[0], 'older page ' + (pages + 1), 20000);
  }
  check(seen.size === 20002 && pages === 21, '20,002 runs in 21 pages, each once (' + seen.size + ' in ' + pages + ')');
  check(last === 'h19999', 'the last page ends with the oldest run (' + last + ')');
  await page.click('#history-newer');
  await waitFor(page, () => !document.querySelector('#history-body tr[data-run="h19999"]') &&
    document.querySelectorAll('#history-body tr').length === 1000, null, 'newer goes back a page');
  await page.fill('#history-q', 'needle-7777;');
  await page.click('#history-search');
  await waitFor(page, () => document.querySelectorAll('#history-body tr').length === 1 &&
    document.querySelector('#history-body tr').dataset.run === 'h07777', null, 'search in captured output finds the one run');
  await page.fill('#history-q', '');
  await page.fill('#history-job', 'job00001');
  await page.click('#history-search');
  await waitFor(page, () => (document.querySelector('#history-body tr[data-run="run-live"] .result') || {}).textContent === 'running',
    null, 'a run on a live instance is running');
  await page.fill('#history-job', 'job00002');
  await page.click('#history-search');
  await waitFor(page, () => (document.querySelector('#history-body tr[data-run="run-dead"] .result') || {}).textContent === 'died (instance gone)',
    null, 'a run whose instance is gone is told apart: died');
  await shot(page, 'history');
}

async function zookeeperDown(page) {
  await page.goto(url + '/#/r/scale/job/job00001');
  await waitFor(page, () => !!document.querySelector('#op-trigger') && !document.querySelector('#op-trigger').disabled &&
    document.querySelector('#zk-banner').hidden, null, 'ZooKeeper up: no banner, buttons enabled');
  process.kill(Number(process.env.ZK_PID), 'SIGKILL');
  await waitFor(page, () => !document.querySelector('#zk-banner').hidden &&
    /not reachable/.test((document.querySelector('#zk-banner') || {}).textContent) && document.querySelector('#op-trigger').disabled, null,
  'ZooKeeper down: banner shown, operation buttons disabled', 40000);
  await shot(page, 'zk-down');
}

async function main() {
  const { ctx, page } = await launch(process.env.USER_DATA_DIR, 900);
  await jobList(page);
  await jobPage(page);
  await registries(page);
  await history(page);
  await zookeeperDown(page);
  await ctx.close();
}

main().then(() => {
  console.log(failed() + ' failure(s)');
  process.exit(failed() === 0 ? 0 : 1);
}).catch(e => { console.error('FAIL: ' + e.stack); process.exit(1); });
