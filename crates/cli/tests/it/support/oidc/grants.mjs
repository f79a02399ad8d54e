// An admin's grant form in headless Chromium (through signin.mjs): sign in through the OIDC
// provider as an admin, submit a grant whose tool pattern and argument rule are hostile (it must
// be refused, the form shown again with what was typed, as text), then a good one for USER's
// `time`. Prints one JSON line of findings.
//
// Env: as signin.mjs, and USER (who gets the grant) and HOSTILE (the hostile text).
import { found, run, shot, signIn } from './signin.mjs';

const { USER, HOSTILE } = process.env;

const grantRows = (page) => page.$$eval('#grants tbody tr', (rows) => rows.length);

await run(async (page) => {
  await signIn(page);
  found.rows_before = await grantRows(page);

  await page.fill('#grant-form input[name=to]', USER);
  await page.fill('#grant-form input[name=tools]', HOSTILE);
  await page.fill('#grant-form input[name=args]', `exec(${HOSTILE})`);
  await page.selectOption('#grant-form select[name=mode]', 'ask');
  await page.click('#grant-form button[type=submit]');
  await page.waitForSelector('.notice.error');
  found.bad_notice = await page.textContent('.notice.error');
  found.bad_tools = await page.inputValue('#grant-form input[name=tools]');
  found.bad_args = await page.inputValue('#grant-form input[name=args]');
  found.bad_mode = await page.inputValue('#grant-form select[name=mode]');
  found.rows_after_bad = await grantRows(page);
  found.xss_ran = await page.evaluate(() => Boolean(window.__xss));
  await shot(page, 'gateway-grant-refused');

  await page.fill('#grant-form input[name=to]', USER);
  await page.fill('#grant-form input[name=tools]', 'time');
  await page.fill('#grant-form input[name=args]', '');
  await page.selectOption('#grant-form select[name=mode]', 'allow');
  await page.fill('#grant-form input[name=note]', 'added in Chromium');
  await page.click('#grant-form button[type=submit]');
  await page.waitForSelector('.notice.ok');
  found.ok_notice = await page.textContent('.notice.ok');
  found.rows_after = await grantRows(page);
  found.xss_ran = found.xss_ran || (await page.evaluate(() => Boolean(window.__xss)));
  found.scripts = await page.evaluate(() => [...document.scripts].map((s) => s.src || 'inline'));
  await shot(page, 'gateway-grant-added');
});
