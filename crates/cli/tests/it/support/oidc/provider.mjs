// A real OpenID Connect provider for the gateway's tests: npm `oidc-provider` (panva) with its
// development interactions (any login name, any password), on loopback.
//
// Env: OIDC_PROVIDER (the package's lib/index.js), REDIRECT (the gateway's /signin/callback), AUDIENCE (the gateway's /mcp URL),
// CLIENT_SECRET, TTL (access tokens' lifetime in seconds, default 600). Prints one JSON line {"issuer": ...} once listening; runs until killed.
// `GET /rotate` replaces the signing key with a new one (a new `kid`; the old key is gone), as a
// provider's key rotation does; sessions and grants start over with it.
//
// Clients: `toolgate` (the page's sign-in, confidential) and `mcp-client` (a public client that
// gets JWT access tokens for AUDIENCE, as an MCP client signing in with OAuth would).
import crypto from 'node:crypto';
import http from 'node:http';
import { pathToFileURL } from 'node:url';

// The package is in the project's npm peers (`cargo xtask deps`); its path comes from the test.
const { default: Provider } = await import(pathToFileURL(process.env.OIDC_PROVIDER).href);

const { REDIRECT, AUDIENCE, CLIENT_SECRET } = process.env;
const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const make = (jwks) => new Provider(issuer, {
  ...(jwks ? { jwks } : {}),
  clients: [
    {
      client_id: 'toolgate',
      client_secret: CLIENT_SECRET,
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    {
      client_id: 'mcp-client',
      redirect_uris: ['http://127.0.0.1:1/callback'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    },
  ],
  pkce: { required: () => true },
  // The scopes' claims in the ID token too (the gateway reads `email` there).
  conformIdTokenClaims: false,
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['preferred_username'] },
  findAccount: (ctx, id) => ({
    accountId: id,
    // A login with an `@` is its own email (another domain); any other is at example.test.
    claims: () => ({ sub: id, email: id.includes('@') ? id : `${id}@example.test`, email_verified: true, preferred_username: id }),
  }),
  features: {
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // An authorization request without `resource` still gets a token for the gateway.
      defaultResource: () => AUDIENCE,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        if (resource !== AUDIENCE) throw new Error(`unknown resource ${resource}`);
        return { scope: 'mcp', audience: AUDIENCE, accessTokenFormat: 'jwt', accessTokenTTL: Number(process.env.TTL || 600) };
      },
    },
  },
});
let handle = make().callback();
let rotations = 0;
server.on('request', (req, res) => {
  if (req.url === '/rotate') {
    const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
    rotations += 1;
    const jwk = { ...privateKey.export({ format: 'jwk' }), kid: `rotated-${rotations}`, use: 'sig', alg: 'RS256' };
    handle = make({ keys: [jwk] }).callback();
    res.end(JSON.stringify({ kid: jwk.kid }));
    return;
  }
  handle(req, res);
});
console.log(JSON.stringify({ issuer }));
