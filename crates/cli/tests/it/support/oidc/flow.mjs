// The authorization code + PKCE flow driven by plain HTTP requests (a cookie jar per origin,
// redirects followed by hand), through oidc-provider's development login and consent forms.
//
//   node flow.mjs signin GATEWAY LOGIN  -> {"cookie": "tg_session=...", "status": N, "html": "..."}
//       the gateway's page sign-in: GATEWAY/signin/oidc ... GATEWAY/signin/callback -> /
//   node flow.mjs token ISSUER LOGIN    -> {"access_token": "...", "id_token": "..."}
//       an MCP client (public client `mcp-client`) getting a JWT access token for the gateway
import crypto from 'node:crypto';

const [mode, base, login] = process.argv.slice(2);
const jar = new Map(); // origin -> Map(name -> value)

function cookieHeader(url) {
  const cookies = jar.get(new URL(url).origin);
  return cookies ? [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') : '';
}

async function request(url, init = {}) {
  const headers = { ...(init.headers || {}) };
  const cookie = cookieHeader(url);
  if (cookie) headers.cookie = cookie;
  const response = await fetch(url, { ...init, headers, redirect: 'manual' });
  const origin = new URL(url).origin;
  for (const line of response.headers.getSetCookie()) {
    const [pair] = line.split(';');
    const at = pair.indexOf('=');
    if (!jar.has(origin)) jar.set(origin, new Map());
    const value = pair.slice(at + 1);
    if (/max-age=0/i.test(line) || value === '') jar.get(origin).delete(pair.slice(0, at));
    else jar.get(origin).set(pair.slice(0, at), value);
  }
  return response;
}

/// Follows redirects from `url`; submits the provider's login and consent forms; stops at a URL
/// `stop` accepts (returned without being fetched) or a page that is not one of those forms.
async function walk(url, stop) {
  for (let i = 0; i < 20; i++) {
    if (stop(url)) return { stopped: url };
    const response = await request(url);
    if (response.status >= 300 && response.status < 400) {
      url = new URL(response.headers.get('location'), url).toString();
      continue;
    }
    const html = await response.text();
    const action = /<form[^>]*action="([^"]+)"/.exec(html);
    if (action && /name="prompt" value="login"/.test(html)) {
      url = await submit(new URL(action[1].replaceAll('&amp;', '&'), url).toString(),
        { prompt: 'login', login, password: 'any' });
      continue;
    }
    if (action && /name="prompt" value="consent"/.test(html)) {
      url = await submit(new URL(action[1].replaceAll('&amp;', '&'), url).toString(), { prompt: 'consent' });
      continue;
    }
    return { status: response.status, html, url };
  }
  throw new Error('too many redirects');
}

async function submit(url, fields) {
  const response = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  if (response.status < 300 || response.status >= 400) {
    throw new Error(`form ${url} answered ${response.status}: ${await response.text()}`);
  }
  return new URL(response.headers.get('location'), url).toString();
}

if (mode === 'signin') {
  const end = await walk(`${base}/signin/oidc`, () => false);
  const session = jar.get(new URL(base).origin)?.get('tg_session');
  console.log(JSON.stringify({ cookie: session ? `tg_session=${session}` : null, status: end.status, html: end.html }));
} else if (mode === 'token') {
  const verifier = crypto.randomBytes(32).toString('base64url');
  const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
  const redirect = 'http://127.0.0.1:1/callback';
  const discovery = await (await fetch(`${base}/.well-known/openid-configuration`)).json();
  const auth = new URL(discovery.authorization_endpoint);
  auth.search = new URLSearchParams({
    client_id: 'mcp-client', response_type: 'code', redirect_uri: redirect, scope: 'openid mcp',
    code_challenge: challenge, code_challenge_method: 'S256', state: crypto.randomBytes(8).toString('hex'),
    resource: process.env.AUDIENCE,
  }).toString();
  const end = await walk(auth.toString(), (u) => u.startsWith(redirect));
  if (!end.stopped) throw new Error(`no code: ${end.status} ${end.html}`);
  const code = new URL(end.stopped).searchParams.get('code');
  const response = await fetch(discovery.token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code', code, redirect_uri: redirect, client_id: 'mcp-client',
      code_verifier: verifier, resource: process.env.AUDIENCE,
    }).toString(),
  });
  const tokens = await response.json();
  if (!tokens.access_token) throw new Error(`no access token: ${JSON.stringify(tokens)}`);
  console.log(JSON.stringify({ access_token: tokens.access_token, id_token: tokens.id_token }));
} else {
  throw new Error('usage: flow.mjs signin GATEWAY LOGIN | token ISSUER LOGIN');
}
