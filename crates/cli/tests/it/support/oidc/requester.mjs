// The requester's side of an access request in headless Chromium (Debian `chromium`, driven by
// playwright-core): sign in through the OIDC provider as a user who is not an admin, file a
// request on the page with a hostile reason, and wait for the decision to show in the requests
// table without a reload (the page's event stream); check that the reason stays text.
//
// Env: PLAYWRIGHT (playwright-core's index.mjs), GATEWAY, LOGIN, REASON, SCREENS (a folder, or
// empty: no screenshots). Talks to the test over stdio: prints `{"request": N}` once the request
// is filed and the page listens, waits for a line (the test has decided it), then prints one
// JSON line of findings and exits.
import { pathToFileURL } from 'node:url';
import readline from 'node:readline';

const { chromium } = await import(pathToFileURL(process.env.PLAYWRIGHT).href);
const { GATEWAY, LOGIN, REASON, SCREENS } = process.env;
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
  await page.click('text=Sign in with your organization');
  await page.fill('input[name=login]', LOGIN);
  await page.fill('input[name=password]', 'any password');
  await page.click('button[type=submit]');
  await page.click('button[type=submit]');
  await page.waitForURL(`${GATEWAY}/`);
  await page.fill('#access input[name=tool]', 'time');
  await page.fill('#access input[name=reason]', REASON);
  await page.click('#access button[type=submit]');
  await page.waitForSelector('.notice.ok');
  found.notice = await page.textContent('.notice.ok');
  const id = Number(/request (\d+)/.exec(found.notice)[1]);
  // The event stream of the page as it is now is open: a decision from here on shows live.
  await page.waitForSelector('#requests-live:not(.off)');
  found.pending_before = (await page.getAttribute(`#request-${id}-state`, 'class')).includes('pending');
  found.xss_ran = await page.evaluate(() => Boolean(window.__xss));
  console.log(JSON.stringify({ request: id }));

  const lines = readline.createInterface({ input: process.stdin });
  for await (const _ of lines) break;
  await page.waitForSelector(`#request-${id}-state.approved`, { timeout: 30000 });
  found.live = true;
  found.requests_text = await page.textContent('#access-body');
  found.xss_ran = found.xss_ran || (await page.evaluate(() => Boolean(window.__xss)));
  found.my_calls = (await page.textContent('#audit')).includes('My calls');
  await shot(page, 'gateway-requester');
  found.scripts = await page.evaluate(() => [...document.scripts].map((s) => s.src || 'inline'));
} catch (e) {
  found.errors.push(String(e && e.stack || e));
} finally {
  await browser.close();
}
console.log(JSON.stringify(found));
