// The gateway's page in headless Chromium (through signin.mjs): sign in through the OIDC
// provider, wait for a pending approval to arrive live (server-sent events, no reload), check
// that a hostile tool parameter stays text in the inbox and the audit search, approve the call,
// and save screenshots.
//
// Env: as signin.mjs. Talks to the test over stdio: prints `ready` once the signed-in page shows
// an empty inbox, waits for a line (the test has started a call that needs approval), then
// prints one JSON line of findings and exits.
import { GATEWAY, found, goAhead, run, shot, signIn } from './signin.mjs';

await run(async (page) => {
  await signIn(page, async () => {
    found.signin_url = page.url();
    await shot(page, 'gateway-signin');
  });
  await page.waitForSelector('#live:not(.off)');
  found.empty_inbox = (await page.textContent('#inbox-body')).includes('Nothing waits');
  console.log('ready');

  await goAhead();
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
});
