// The gateway's page in headless Chromium (Debian `chromium`, driven by playwright-core):
// sign in through the OIDC provider's login and consent forms, wait for a pending approval to
// arrive live (server-sent events, no reload), check that a hostile tool parameter stays text
// in the inbox and the audit search, approve the call, and save screenshots.
//
// Env: PLAYWRIGHT (playwright-core's index.mjs), GATEWAY, LOGIN, SCREENS (a folder, or empty:
// no screenshots). Talks to the test over stdio: prints `ready` once the signed-in page shows an
// empty inbox, waits for a line (the test has started a call that needs approval), then prints
// one JSON line of findings and exits.
import { pathToFileURL } from 'node:url';
import readline from 'node:readline';

const { chromium } = await import(pathToFileURL(process.env.PLAYWRIGHT).href);
const { GATEWAY, LOGIN, SCREENS } = process.env;
const found = { dialogs: [], csp: [], errors: [] };
const shot = async (page, name) => {
  if (SCREENS) await page.screenshot({ path: `${SCREENS}/${name}.png`, fullPage: true });
};

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('dialog', async (d) => { found.dialogs.push(d.message()); await d.dismiss(); });
  page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) found.csp.push(m.text()); });
  page.on('pageerror', (e) => found.errors.push(String(e)));

  await page.goto(`${GATEWAY}/`);
  found.signin_url = page.url();
  await shot(page, 'gateway-signin');
  await page.click('text=Sign in with your organization');
  await page.fill('input[name=login]', LOGIN);
  await page.fill('input[name=password]', 'any password');
  await page.click('button[type=submit]');
  // The provider's consent page.
  await page.click('button[type=submit]');
  await page.waitForURL(`${GATEWAY}/`);
  await page.waitForSelector('#live:not(.off)');
  found.empty_inbox = (await page.textContent('#inbox-body')).includes('Nothing waits');
  console.log('ready');

  const lines = readline.createInterface({ input: process.stdin });
  for await (const _ of lines) break;
  // The call arrives through the event stream: no reload.
  await page.waitForSelector('li.pending', { timeout: 30000 });
  found.live = true;
  found.badge = await page.textContent('#pending-count');
  found.inbox_text = await page.textContent('#inbox-body');
  await shot(page, 'gateway-page');
  found.xss_ran = await page.evaluate(() => Boolean(window.__xss));
  await page.click('li.pending button[value=allow_once]');
  await page.waitForSelector('.notice.ok');
  found.notice = await page.textContent('.notice.ok');
  // The audit search, filtered on the tool, with the hostile parameter in a row.
  await page.goto(`${GATEWAY}/?tool=write#audit`);
  found.audit_text = await page.textContent('#audit');
  found.xss_ran = found.xss_ran || (await page.evaluate(() => Boolean(window.__xss)));
  await shot(page, 'gateway-audit');
  found.scripts = await page.evaluate(() => [...document.scripts].map((s) => s.src || 'inline'));
} catch (e) {
  found.errors.push(String(e && e.stack || e));
} finally {
  await browser.close();
}
console.log(JSON.stringify(found));
