// An MCP server whose OAuth 2.1 authorization server issues refresh tokens, built from the
// TypeScript SDK's own pieces (@modelcontextprotocol/sdk@1.32.2: auth router with dynamic client
// registration, bearer middleware, Streamable HTTP transport, the example's in-memory provider).
// The SDK's example server (`simpleStreamableHttp.js --oauth`) issues no refresh tokens and
// answers an unknown token with 500, so the refresh path is tested here.
//
// Environment: NODE_MODULES (the peers' node_modules), PORT. Test hooks: POST /test/expire
// drops every access token; GET /test/stats counts refreshes and 401 answers to POST /mcp.
// With --reject-refreshed, tokens minted by a refresh are refused too.
'use strict';
const path = require('node:path');
const { randomUUID } = require('node:crypto');
const req = require('node:module').createRequire(path.join(process.env.NODE_MODULES, 'index.js'));
const z = req('zod/v4');
const { McpServer } = req('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = req('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { createMcpExpressApp } = req('@modelcontextprotocol/sdk/server/express.js');
const { mcpAuthRouter, getOAuthProtectedResourceMetadataUrl } = req('@modelcontextprotocol/sdk/server/auth/router.js');
const { requireBearerAuth } = req('@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js');
const { InvalidGrantError, InvalidTokenError } = req('@modelcontextprotocol/sdk/server/auth/errors.js');
const { DemoInMemoryAuthProvider } = req('@modelcontextprotocol/sdk/examples/server/demoInMemoryOAuthProvider.js');
const { isInitializeRequest } = req('@modelcontextprotocol/sdk/types.js');

const port = Number(process.env.PORT);
const rejectRefreshed = process.argv.includes('--reject-refreshed');
const base = new URL(`http://localhost:${port}`);
const mcpUrl = new URL('/mcp', base);
const stats = { refreshes: 0, unauthorized: 0 };
const minted = new Set();

class RefreshingProvider extends DemoInMemoryAuthProvider {
    constructor() {
        super();
        this.refreshTokens = new Map();
    }
    async exchangeAuthorizationCode(client, code, verifier) {
        const tokens = await super.exchangeAuthorizationCode(client, code, verifier);
        const refresh_token = randomUUID();
        this.refreshTokens.set(refresh_token, { clientId: client.client_id, scope: tokens.scope });
        return { ...tokens, refresh_token };
    }
    async exchangeRefreshToken(client, refreshToken, _scopes, resource) {
        const grant = this.refreshTokens.get(refreshToken);
        if (!grant || grant.clientId !== client.client_id) {
            throw new InvalidGrantError('unknown refresh token');
        }
        stats.refreshes++;
        const token = randomUUID();
        const scopes = grant.scope ? grant.scope.split(' ') : [];
        this.tokens.set(token, { token, clientId: client.client_id, scopes, expiresAt: Date.now() + 3600000, resource, type: 'access' });
        if (rejectRefreshed) minted.add(token);
        return { access_token: token, token_type: 'bearer', expires_in: 3600, scope: grant.scope, refresh_token: refreshToken };
    }
    async verifyAccessToken(token) {
        if (minted.has(token)) throw new InvalidTokenError('refused by --reject-refreshed');
        try {
            return await super.verifyAccessToken(token);
        } catch {
            throw new InvalidTokenError('Invalid or expired token');
        }
    }
}

const provider = new RefreshingProvider();
const app = createMcpExpressApp();
app.use(mcpAuthRouter({ provider, issuerUrl: base, resourceServerUrl: mcpUrl, scopesSupported: ['mcp:tools'] }));
app.get('/test/stats', (_req, res) => res.json(stats));
app.post('/test/expire', (_req, res) => {
    provider.tokens.clear();
    res.json({ expired: true });
});

const countUnauthorized = (req, res, next) => {
    res.on('finish', () => {
        if (req.method === 'POST' && res.statusCode === 401) stats.unauthorized++;
    });
    next();
};
const auth = requireBearerAuth({ verifier: provider, requiredScopes: [], resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpUrl) });

const sessions = new Map();
app.all('/mcp', countUnauthorized, auth, async (req, res) => {
    const sid = req.headers['mcp-session-id'];
    let transport = sid ? sessions.get(sid) : undefined;
    if (!transport) {
        if (sid || req.method !== 'POST' || !isInitializeRequest(req.body)) {
            res.status(sid ? 404 : 400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
            return;
        }
        transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            onsessioninitialized: id => sessions.set(id, transport)
        });
        const server = new McpServer({ name: 'oauth-refresh-fixture', version: '1.0.0' });
        server.registerTool('greet', { description: 'A greeting', inputSchema: { name: z.string() } }, async ({ name }) => ({
            content: [{ type: 'text', text: `Hello, ${name}!` }]
        }));
        await server.connect(transport);
    }
    await transport.handleRequest(req, res, req.body);
});

app.listen(port, error => {
    if (error) {
        console.error(error);
        process.exit(1);
    }
    console.log(`OAuth refresh fixture listening on port ${port}`);
});
