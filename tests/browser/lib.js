// Helpers of the console's browser tests (playwright-core and Debian's
// chromium): checks counted as they go, a poll of the page, the browser.
'use strict';
const { chromium } = require('playwright-core');

let failures = 0;
function ok(what) { console.log('ok: ' + what); }
function fail(what) { console.error('FAIL: ' + what); failures++; }
function check(cond, what) { cond ? ok(what) : fail(what); }
function failed() { return failures; }

// Polls fn in the page until it is true (pass) or timeout ms have gone
// (fail). The page may be between views (an element not made yet, a
// navigation under way), so a throw counts as "not yet". A string predicate
// for waitForFunction would need eval, which the console's CSP forbids.
async function waitFor(page, fn, arg, what, timeout) {
  const deadline = Date.now() + (timeout || 15000);
  let last = 'false';
  for (;;) {
    try {
      if (await page.evaluate(fn, arg)) { ok(what); return true; }
      last = 'false';
    } catch (e) {
      last = e.message.split('\n')[0];
    }
    if (Date.now() >= deadline) { fail(what + ' (last poll: ' + last + ')'); return false; }
    await new Promise(r => setTimeout(r, 200));
  }
}

async function confirmYes(page) {
  await page.waitForSelector('#confirm:not([hidden])', { timeout: 5000 });
  await page.click('#confirm-ok');
}

// Headless chromium with its profile in dir; a script error in the page fails.
async function launch(dir, height) {
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: height || 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  page.on('pageerror', e => fail('script error in the page: ' + e.message));
  return { ctx, page };
}

async function login(page, url, user, password) {
  await page.goto(url + '/', { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('#login-form', { timeout: 10000 });
  await page.fill('#login-user', user);
  await page.fill('#login-password', password);
  await page.click('#login-submit');
}

module.exports = { ok, fail, check, failed, waitFor, confirmYes, launch, login };
