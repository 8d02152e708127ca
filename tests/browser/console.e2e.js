// The console page end to end in Debian's chromium, driven by playwright-core:
// log in, filter the job list, watch items move after a daemon is killed,
// trigger, disable and enable, edit a config and see the validator's errors
// next to the fields, read history (a failed run's output as text), a job's fires, the server view, a guest without buttons.
// Environment: CONSOLE_URL, KILL_PID (a daemon to kill -9), KEEP_IP (the
// survivor's IP), ARTIFACTS (screenshot directory), USER_DATA_DIR.
'use strict';
const path = require('path');
const lib = require('./lib.js');
const { check, waitFor, confirmYes } = lib;

const url = process.env.CONSOLE_URL;
const artifacts = process.env.ARTIFACTS;

async function shot(page, name) {
  await page.screenshot({ path: path.join(artifacts, name + '.png'), fullPage: true });
}

const login = (page, user, password) => lib.login(page, url, user, password);

const owners = () => [...document.querySelectorAll('#items-body tr td.owner')].map(td => td.textContent);

async function main() {
  const { ctx, page } = await lib.launch(process.env.USER_DATA_DIR, 900);

  // ---------------------------------------------------------------- login
  await login(page, 'alice', 'wrong');
  await waitFor(page, () => /wrong user name or password/.test(document.querySelector('#login-error').textContent),
    null, 'wrong password shown on the login form');
  await login(page, 'alice', 'adm1n pass');
  await waitFor(page, () => !!document.querySelector('#jobs-body tr[data-job="browserJob"]'), null, 'job list after login');
  await waitFor(page, () => {
    const r = document.querySelector('#jobs-body tr[data-job="browserJob"]');
    return r && r.querySelector('.status').textContent === 'OK' && r.children[4].textContent === '2';
  }, null, 'browserJob OK with 2 instances');
  await waitFor(page, () => {
    const r = document.querySelector('#jobs-body tr[data-job="brokenJob"]');
    return r && /shardingTotalCount/.test(r.lastChild.textContent);
  }, null, 'a job with an invalid config shows its error');
  await page.fill('#filter-name', 'broken');
  await waitFor(page, () => document.querySelectorAll('#jobs-body tr').length === 1, null, 'name filter');
  await page.fill('#filter-name', '');
  await page.selectOption('#filter-status', 'CRASHED');
  await waitFor(page, () => [...document.querySelectorAll('#jobs-body tr')].every(r => r.querySelector('.status').textContent === 'CRASHED'),
    null, 'status filter');
  await page.selectOption('#filter-status', '');
  await shot(page, '1-jobs');

  // ---------------------------------------------------------------- items move after kill -9
  await page.click('#jobs-body tr[data-job="browserJob"] a');
  await waitFor(page, () => document.querySelectorAll('#items-body tr').length === 4, null, 'job page shows 4 items');
  check(!/\bnull\b|undefined/.test(await page.textContent('#view')), 'no "null" or "undefined" shown on the job page');
  const before = await page.evaluate(owners);
  const killed = before.filter(o => !o.startsWith(process.env.KEEP_IP + '@')).length;
  check(killed > 0, 'items spread over both daemons before the kill: ' + before.join(', '));
  await shot(page, '2-job-before-kill');
  const t0 = Date.now();
  process.kill(Number(process.env.KILL_PID), 'SIGKILL');
  // No reload: the page polls and must show the new owners by itself.
  await waitFor(page, ip => {
    const o = [...document.querySelectorAll('#items-body tr td.owner')].map(td => td.textContent);
    return o.length === 4 && o.every(x => x.startsWith(ip + '@') && !x.includes('(gone)'));
  }, process.env.KEEP_IP, 'items moved to the surviving daemon on the page', 30000);
  console.log('figure: items shown on the survivor ' + (Date.now() - t0) + ' ms after kill -9');
  await shot(page, '3-job-after-kill');

  // ---------------------------------------------------------------- trigger
  await page.click('#op-trigger');
  await page.waitForSelector('#confirm:not([hidden])');
  check(/Trigger browserJob/.test(await page.textContent('#confirm-text')), 'trigger asks for confirmation');
  await page.click('#confirm-cancel');
  await page.click('#op-trigger');
  await confirmYes(page);
  await waitFor(page, () => /Trigger browserJob on every live instance: done/.test(document.querySelector('#flash').textContent),
    null, 'trigger done');

  // ---------------------------------------------------------------- disable / enable
  await page.click('#op-disable');
  await confirmYes(page);
  await waitFor(page, () => document.querySelector('#job-head .status').textContent === 'DISABLED', null, 'job DISABLED after disable');
  await shot(page, '4-job-disabled');
  await page.click('#op-enable');
  await confirmYes(page);
  await waitFor(page, () => document.querySelector('#job-head .status').textContent !== 'DISABLED', null, 'job enabled again');
  // One item.
  await page.click('#items-body tr[data-item="1"] button');
  await confirmYes(page);
  await waitFor(page, () => document.querySelector('#items-body tr[data-item="1"] .status').textContent === 'DISABLED', null, 'item 1 disabled');

  // ---------------------------------------------------------------- config editing
  await page.click('#op-config');
  await page.waitForSelector('#config-form input[name="cron"]');
  await page.fill('#config-form input[name="shardingTotalCount"]', '0');
  await page.fill('#config-form input[name="cron"]', '0 0 0 30 2 ? x');
  await page.click('#config-save');
  await page.waitForSelector('#confirm:not([hidden])');
  check(/shardingTotalCount: 4 -> 0/.test(await page.textContent('#confirm-detail')), 'save confirmation lists the changed fields');
  await page.click('#confirm-ok');
  await waitFor(page, () => /must be >= 1/.test(document.querySelector('#err-shardingTotalCount').textContent),
    null, 'validator error next to shardingTotalCount');
  await waitFor(page, () => document.querySelector('#err-cron').textContent.length > 0, null, 'validator error next to cron');
  await shot(page, '5-config-errors');
  await page.fill('#config-form input[name="shardingTotalCount"]', '4');
  await page.fill('#config-form input[name="cron"]', '0/3 * * * * ?');
  await page.click('#config-save');
  await confirmYes(page);
  await waitFor(page, () => /saved \(version/.test(document.querySelector('#flash').textContent), null, 'valid config saved');

  // ---------------------------------------------------------------- history, servers
  await page.goto(url + '/#/job/browserJob/history');
  await waitFor(page, () => document.querySelector('#history-job').value === 'browserJob' &&
    document.querySelectorAll('#history-body tr').length > 0 &&
    [...document.querySelectorAll('#history-body tr td:nth-child(2)')].every(td => td.textContent === 'browserJob'),
  null, 'a job\'s history lists its runs', 30000);
  await page.click('#nav-history');
  await page.fill('#history-job', 'outJob');
  await page.check('#history-failed');
  await page.click('#history-search');
  await waitFor(page, () => {
    const rows = [...document.querySelectorAll('#history-body tr')];
    return rows.length > 0 && rows.every(r => r.children[1].textContent === 'outJob' && r.querySelector('.result').textContent === 'FAILED exit 4');
  }, null, 'history filtered to outJob\'s failed runs', 30000);
  await shot(page, '6-history');
  await page.click('#history-body tr a.run-link');
  await waitFor(page, () => /boom <img src=x onerror="window.__pwned=1"> on stderr/.test((document.querySelector('#run-stderr') || {}).textContent || ''),
    null, 'a run\'s stderr shown as text', 15000);
  check(/out line \\xff <b>not bold<\/b>/.test(await page.textContent('#run-stdout')), 'stdout with a byte that is not UTF-8 shown as \\xff, markup as text');
  check(await page.$('#view img') === null && await page.$('#run-stdout b') === null, 'no element made from stored output');
  check(await page.evaluate(() => window.__pwned === undefined), 'stored output ran no script');
  check(/TASK_ERROR/.test(await page.textContent('#run-trail')), 'status trail shown, ending in TASK_ERROR');
  check(await page.textContent('#run-result') === 'FAILED exit 4', 'run result FAILED exit 4');
  await shot(page, '7-run');
  // The fire ledger of outJob: every run failed (exit 4), so each ran cell
  // is an instance marked "!" that links to its run; "gaps only" keeps the
  // fire times with an item not run and nothing else.
  await page.goto(url + '/#/job/outJob/fires');
  await waitFor(page, () => {
    const cells = [...document.querySelectorAll('#fires tbody tr td:nth-child(2)')].filter(td => td.querySelector('a'));
    return cells.length >= 2 && cells.every(td => /^127\.0\.0\.6[12]!$/.test(td.textContent) && td.classList.contains('failed'));
  }, null, 'fires view: outJob\'s fire times, each run a failed one on an instance', 30000);
  check(/^Item 0$/.test(await page.textContent('#fires thead th:nth-child(2)')), 'fires view: a column per item');
  await page.check('#fires-gaps');
  await waitFor(page, () => [...document.querySelectorAll('#fires tbody tr')].every(r =>
    r.querySelector('td.not-run')), null, 'fires view: gaps only shows only fire times with an item not run');
  await page.uncheck('#fires-gaps');
  await shot(page, '7b-fires');
  await page.click('#fires tbody tr td a.run-link');
  await waitFor(page, () => (document.querySelector('#run-result') || {}).textContent === 'FAILED exit 4',
    null, 'a fire\'s cell links to its run');
  await page.click('#nav-servers');
  await waitFor(page, () => document.querySelectorAll('#servers-list section').length === 2, null, 'server view shows both IPs');
  check(await page.textContent('#flash') === '', 'a notice of another page (config saved) is not shown on the server view');
  await shot(page, '8-servers');

  // ---------------------------------------------------------------- a guest sees no buttons
  await page.click('#logout');
  await login(page, 'gus', 'guest-pass');
  await waitFor(page, () => !!document.querySelector('#jobs-body tr[data-job="browserJob"]'), null, 'guest sees the job list');
  await page.goto(url + '/#/job/browserJob');
  await waitFor(page, () => document.querySelectorAll('#items-body tr').length === 4, null, 'guest sees the items');
  check(await page.$('#op-trigger') === null, 'guest has no trigger button');
  await ctx.close();
}

main().then(() => {
  console.log(lib.failed() + ' failure(s)');
  process.exit(lib.failed() === 0 ? 0 : 1);
}).catch(e => { console.error('FAIL: ' + e.stack); process.exit(1); });
