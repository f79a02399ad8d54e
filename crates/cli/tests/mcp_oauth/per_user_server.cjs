// An MCP server that checks bearer tokens and says whose token it saw, for the team gateway's
// per-user upstream sign-ins (issue 28 item 3). Built from the TypeScript SDK's own pieces
// (@modelcontextprotocol/sdk@1.32.2: auth router with dynamic client registration, bearer
// middleware, Streamable HTTP transport, the example's in-memory provider).
//
// Each sign-in is made for a person: `POST /test/subject?name=ann` names the person the next
// authorization code is exchanged for (the provider approves by itself, as the SDK's example does).
// The `whoami` tool answers with the person whose token carried the request and the person whose
// token opened the MCP session, so a call made over someone else's connection or with someone
// else's token shows. `GET /test/tokens` lists every access token issued (the test looks for them
// where they must never be); `GET /test/seen` lists the person of every authorized POST /mcp.
//
// Environment: NODE_MODULES (the peers' node_modules), PORT.
'use strict';
const path = require('node:path');
const { randomUUID } = require('node:crypto');
const req = require('node:module').createRequire(path.join(process.env.NODE_MODULES, 'index.js'));
const { McpServer } = req('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = req('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { createMcpExpressApp } = req('@modelcontextprotocol/sdk/server/express.js');
const { mcpAuthRouter, getOAuthProtectedResourceMetadataUrl } = req('@modelcontextprotocol/sdk/server/auth/router.js');
const { requireBearerAuth } = req('@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js');
const { InvalidTokenError } = req('@modelcontextprotocol/sdk/server/auth/errors.js');
const { DemoInMemoryAuthProvider } = req('@modelcontextprotocol/sdk/examples/server/demoInMemoryOAuthProvider.js');
const { isInitializeRequest } = req('@modelcontextprotocol/sdk/types.js');

const port = Number(process.env.PORT);
const base = new URL(`http://localhost:${port}`);
const mcpUrl = new URL('/mcp', base);
// access token -> the person it was issued for
const subjects = new Map();
const seen = [];
let nextSubject = 'nobody';

class PersonProvider extends DemoInMemoryAuthProvider {
    async exchangeAuthorizationCode(client, code, verifier) {
        const tokens = await super.exchangeAuthorizationCode(client, code, verifier);
        subjects.set(tokens.access_token, nextSubject);
        return tokens;
    }
    async verifyAccessToken(token) {
        try {
            return await super.verifyAccessToken(token);
        } catch {
            throw new InvalidTokenError('Invalid or expired token');
        }
    }
}

const provider = new PersonProvider();
const app = createMcpExpressApp();
app.use(mcpAuthRouter({ provider, issuerUrl: base, resourceServerUrl: mcpUrl, scopesSupported: ['mcp:tools'] }));
app.post('/test/subject', (request, res) => {
    nextSubject = String(request.query.name);
    res.json({ next: nextSubject });
});
app.get('/test/tokens', (_request, res) => res.json([...subjects.keys()]));
app.get('/test/seen', (_request, res) => res.json(seen));

const auth = requireBearerAuth({ verifier: provider, requiredScopes: [], resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpUrl) });
const person = request => subjects.get(request.auth && request.auth.token) || 'unknown';

const sessions = new Map();
app.all('/mcp', auth, async (request, res) => {
    if (request.method === 'POST') seen.push(person(request));
    const sid = request.headers['mcp-session-id'];
    let entry = sid ? sessions.get(sid) : undefined;
    if (!entry) {
        if (sid || request.method !== 'POST' || !isInitializeRequest(request.body)) {
            res.status(sid ? 404 : 400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
            return;
        }
        const opener = person(request);
        const transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            onsessioninitialized: id => sessions.set(id, { transport, opener })
        });
        entry = { transport, opener };
        const server = new McpServer({ name: 'per-user-fixture', version: '1.0.0' });
        server.registerTool('whoami', { description: 'Whose token carried this call', annotations: { readOnlyHint: true } }, async extra => {
            const token = extra && extra.authInfo ? extra.authInfo.token : undefined;
            const who = subjects.get(token) || 'unknown';
            return { content: [{ type: 'text', text: `token of ${who}; session opened by ${opener}` }] };
        });
        await server.connect(transport);
    }
    await entry.transport.handleRequest(request, res, request.body);
});

app.listen(port, error => {
    if (error) {
        console.error(error);
        process.exit(1);
    }
    console.log(`per-user fixture listening on port ${port}`);
});
