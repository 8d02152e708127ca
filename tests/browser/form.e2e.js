// The config form and the shut-down state in Debian's chromium, driven by
// playwright-core: the form generated from the field table (a select for an
// enum, a number input, the tz database's zones, a help line per field,
// Java-only fields folded away, fields of another job type hidden), every
// problem of a bad submit shown at once at its field (a folded group opens),
// and a shut-down instance: "shut down: restart needed", then Restart.
// Environment: CONSOLE_URL, ARTIFACTS (screenshot directory), USER_DATA_DIR.
'use strict';
const path = require('path');
const { check, failed, waitFor, confirmYes, launch, login } = require('./lib.js');

const url = process.env.CONSOLE_URL;

async function main() {
  const { ctx, page } = await launch(process.env.USER_DATA_DIR, 1000);
  await login(page, url, 'alice', 'adm1n pass');
  await page.waitForSelector('#jobs-body tr[data-job="formJob"]', { timeout: 15000 });

  // ------------------------------------------------------------ the form
  await page.goto(url + '/#/job/formJob/config');
  await page.waitForSelector('#config-form select[name="jobType"]', { timeout: 10000 });
  const form = await page.evaluate(() => {
    const q = s => document.querySelector('#config-form ' + s);
    const inJava = n => !!q('#form-java [data-field="' + n + '"]');
    return {
      jobType: [...q('select[name="jobType"]').options].map(o => o.value).join(','),
      jobTypeValue: q('select[name="jobType"]').value,
      count: q('input[name="shardingTotalCount"]').type + '=' + q('input[name="shardingTotalCount"]').value,
      failover: q('input[name="failover"]').type + '=' + q('input[name="failover"]').checked,
      zones: q('select[name="timeZone"]') ? [...q('select[name="timeZone"]').options].map(o => o.value) : [],
      httpMethod: q('select[name="httpMethod"]') ? q('select[name="httpMethod"]').options.length : 0,
      misfirePolicy: q('select[name="misfirePolicy"]') ? q('select[name="misfirePolicy"]').value + '|' +
        [...q('select[name="misfirePolicy"]').options].map(o => o.value).join(',') : 'none',
      timeoutMain: !!q('#form-main input[type="number"][name="timeoutSeconds"]'),
      cronHelp: q('#help-cron').textContent,
      javaOpen: q('#form-java').open,
      java: ['jobClass', 'monitorPort', 'jobProperties.job_exception_handler',
        'jobProperties.executor_service_handler'].every(inJava),
      cronMain: !!q('#form-main [data-field="cron"]'),
      httpHidden: q('[data-field="httpUri"]').offsetParent === null,
      scriptShown: q('[data-field="scriptCommandLine"]').offsetParent !== null,
    };
  });
  check(form.jobType === 'SIMPLE,DATAFLOW,SCRIPT,HTTP' && form.jobTypeValue === 'SCRIPT', 'jobType is a select of the job types: ' + form.jobType);
  check(form.count === 'number=2', 'shardingTotalCount is a number input: ' + form.count);
  check(form.failover === 'checkbox=true', 'failover is a checkbox: ' + form.failover);
  check(form.zones.includes('Asia/Shanghai') && form.zones.includes('Europe/Paris') && form.zones.length > 300,
    'timeZone is a select of the tz database (' + form.zones.length + ' options)');
  check(form.httpMethod === 7, 'httpMethod is a select of 7 methods');
  check(form.misfirePolicy === '|,ONCE,SKIP,CATCH_UP', 'misfirePolicy is a select that may stay empty: ' + form.misfirePolicy);
  check(form.timeoutMain, 'timeoutSeconds is a number input of the main group');
  check(/Quartz cron/.test(form.cronHelp), 'cron has its help line: ' + form.cronHelp);
  check(form.java && !form.javaOpen, 'jobClass, monitorPort and the handler classes are folded away');
  check(form.cronMain, 'cron is in the main group');
  check(form.httpHidden && form.scriptShown, 'a SCRIPT job: HTTP fields hidden, scriptCommandLine shown');
  await page.selectOption('#config-form select[name="jobType"]', 'HTTP');
  check(await page.evaluate(() => document.querySelector('[data-field="httpUri"]').offsetParent !== null &&
    document.querySelector('[data-field="scriptCommandLine"]').offsetParent === null), 'choosing HTTP shows the HTTP fields');
  await page.selectOption('#config-form select[name="jobType"]', 'SCRIPT');
  await page.screenshot({ path: path.join(process.env.ARTIFACTS, '1-form.png'), fullPage: true });

  // ------------------------------------------- a bad submit: every error
  await page.fill('#config-form input[name="shardingTotalCount"]', '0');
  await page.fill('#config-form input[name="cron"]', 'not a cron');
  // A user unfolds the groups to reach their fields, and folds them again.
  await page.click('#form-java summary');
  await page.click('#form-more summary');
  await page.fill('#config-form input[name="monitorPort"]', '70000');
  await page.fill('#config-form input[name="maxTimeDiffSeconds"]', '-5');
  await page.click('#form-java summary');
  await page.click('#form-more summary');
  await page.click('#config-save');
  await confirmYes(page);
  await waitFor(page, () => document.querySelectorAll('#config-errors li').length === 4, null,
    'four problems listed at once');
  const errs = await page.evaluate(() => ['shardingTotalCount', 'cron', 'monitorPort', 'maxTimeDiffSeconds']
    .map(n => n + ': ' + document.getElementById('err-' + n).textContent));
  check(/must be >= 1/.test(errs[0]) && errs[1].length > 'cron: '.length &&
    /65535/.test(errs[2]) && /-1 or >= 0/.test(errs[3]), 'each problem next to its field: ' + errs.join(' | '));
  check(await page.evaluate(() => document.querySelector('#form-java').open && document.querySelector('#form-more').open),
    'a folded group with a problem opens');
  await page.screenshot({ path: path.join(process.env.ARTIFACTS, '2-form-errors.png'), fullPage: true });
  await page.fill('#config-form input[name="shardingTotalCount"]', '2');
  await page.fill('#config-form input[name="cron"]', '0/2 * * * * ?');
  await page.fill('#config-form input[name="monitorPort"]', '-1');
  await page.fill('#config-form input[name="maxTimeDiffSeconds"]', '-1');
  await page.selectOption('#config-form select[name="timeZone"]', 'Asia/Shanghai');
  await page.click('#config-save');
  await page.waitForSelector('#confirm:not([hidden])');
  const detail = await page.textContent('#confirm-detail');
  check(detail === 'timeZone: undefined -> "Asia/Shanghai"', 'the confirmation lists only the changed field: ' + detail);
  await page.click('#confirm-ok');
  await waitFor(page, () => /saved \(version/.test(document.querySelector('#flash').textContent), null, 'the fixed config saved');
  await waitFor(page, () => document.querySelector('#config-form select[name="timeZone"]').value === 'Asia/Shanghai',
    null, 'the saved zone is shown');

  // ------------------------------------------------- shut down, restart
  await page.goto(url + '/#/job/formJob');
  await page.waitForSelector('#instances-body tr[data-instance] button.danger', { timeout: 15000 });
  await page.click('#instances-body tr[data-instance] button.danger');
  await confirmYes(page);
  await waitFor(page, () => /shut down: restart needed/.test(document.querySelector('#job-shutdown').textContent),
    null, 'the job page says "shut down: restart needed"');
  await waitFor(page, () => /shut down: restart needed/.test(document.querySelector('#servers-body tr[data-ip="127.0.0.71"]').textContent),
    null, 'its server reads "shut down: restart needed", not ENABLED');
  await page.waitForSelector('#op-restart', { timeout: 10000 });
  await page.screenshot({ path: path.join(process.env.ARTIFACTS, '3-shut-down.png'), fullPage: true });
  await page.click('#op-restart');
  await confirmYes(page);
  await waitFor(page, () => !document.querySelector('#job-shutdown') &&
    document.querySelectorAll('#instances-body tr[data-instance]').length === 1, null,
    'Restart brings the instance back', 20000);
  await waitFor(page, () => /ENABLED/.test(document.querySelector('#servers-body tr[data-ip="127.0.0.71"]').textContent),
    null, 'its server is ENABLED again');
  await ctx.close();
  console.log(failed() + ' failure(s)');
  process.exit(failed() ? 1 : 0);
}

main().catch(e => { console.error('FAIL: ' + e.stack); process.exit(1); });
