// The requester's side of an access request in headless Chromium (through signin.mjs): sign in
// through the OIDC provider as a user who is not an admin, file a request on the page with a
// hostile reason, and wait for the decision to show in the requests table without a reload (the
// page's event stream); check that the reason stays text.
//
// Env: as signin.mjs, and REASON. Talks to the test over stdio: prints `{"request": N}` once the
// request is filed and the page listens, waits for a line (the test has decided it), then
// prints one JSON line of findings and exits.
import { found, goAhead, run, shot, signIn } from './signin.mjs';

const { REASON } = process.env;

await run(async (page) => {
  await signIn(page);
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

  await goAhead();
  await page.waitForSelector(`#request-${id}-state.approved`, { timeout: 30000 });
  found.live = true;
  found.requests_text = await page.textContent('#access-body');
  found.xss_ran = found.xss_ran || (await page.evaluate(() => Boolean(window.__xss)));
  found.my_calls = (await page.textContent('#audit')).includes('My calls');
  await shot(page, 'gateway-requester');
  found.scripts = await page.evaluate(() => [...document.scripts].map((s) => s.src || 'inline'));
});
