// What the Chromium scripts (page.mjs, requester.mjs) share: headless Chromium (Debian
// `chromium`, driven by playwright-core) on one page that records what must never happen
// (dialogs, Content Security Policy reports, page errors), sign-in through the OIDC provider's
// development login and consent forms, screenshots, and the wait for the test's go-ahead.
//
// Env: PLAYWRIGHT (playwright-core's index.mjs), GATEWAY, LOGIN, SCREENS (a folder, or empty:
// no screenshots).
import { pathToFileURL } from 'node:url';
import readline from 'node:readline';

const { chromium } = await import(pathToFileURL(process.env.PLAYWRIGHT).href);
export const { GATEWAY, LOGIN, SCREENS } = process.env;

// The findings printed at the end; each script adds its own.
export const found = { dialogs: [], csp: [], errors: [] };

export const shot = async (page, name) => {
  if (SCREENS) await page.screenshot({ path: `${SCREENS}/${name}.png`, fullPage: true });
};

// Runs `steps(page)` on a new page, records a failure among the errors, closes the browser and
// prints the findings as one JSON line.
export async function run(steps) {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('dialog', async (d) => { found.dialogs.push(d.message()); await d.dismiss(); });
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) found.csp.push(m.text()); });
    page.on('pageerror', (e) => found.errors.push(String(e)));
    await steps(page);
  } catch (e) {
    found.errors.push(String(e && e.stack || e));
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(found));
}

// Opens the gateway, which sends a visitor to its sign-in page; runs `atSignin` there; signs in
// as LOGIN through the provider's login and consent forms and waits to be back on the page.
export async function signIn(page, atSignin = async () => {}) {
  await page.goto(`${GATEWAY}/`);
  await atSignin();
  await page.click('text=Sign in with your organization');
  await page.fill('input[name=login]', LOGIN);
  await page.fill('input[name=password]', 'any password');
  await page.click('button[type=submit]');
  // The provider's consent page.
  await page.click('button[type=submit]');
  await page.waitForURL(`${GATEWAY}/`);
}

// Waits for a line from the test: it has done its part.
export async function goAhead() {
  const lines = readline.createInterface({ input: process.stdin });
  for await (const _ of lines) break;
}
