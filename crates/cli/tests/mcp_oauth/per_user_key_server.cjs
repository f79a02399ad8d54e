// An MCP server that takes a static key per person, for the team gateway's per-user keys
// (`user_key_header`, issue 28 item 3). Built from the TypeScript SDK's Streamable HTTP transport
// (@modelcontextprotocol/sdk@1.32.2).
//
// `KEYS` names the keys it accepts (`ann=KEY1,bob=KEY2`): a POST /mcp whose `Authorization` is
// `Bearer KEY` of one of them is that person's, anything else gets 401. The `whoami` tool answers
// with the person whose key carried the request and the person whose key opened the MCP session,
// so a call made over someone else's connection or with someone else's key shows. `GET
// /test/seen` lists the person of every POST /mcp (`nobody` when no key was sent, `unknown`
// for a key it does not know).
//
// Environment: NODE_MODULES (the peers' node_modules), PORT, KEYS.
'use strict';
const path = require('node:path');
const { randomUUID } = require('node:crypto');
const req = require('node:module').createRequire(path.join(process.env.NODE_MODULES, 'index.js'));
const { McpServer } = req('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = req('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { createMcpExpressApp } = req('@modelcontextprotocol/sdk/server/express.js');
const { isInitializeRequest } = req('@modelcontextprotocol/sdk/types.js');

const port = Number(process.env.PORT);
// key -> person
const people = new Map(
    String(process.env.KEYS || '').split(',').filter(Boolean).map(pair => {
        const at = pair.indexOf('=');
        return [pair.slice(at + 1), pair.slice(0, at)];
    })
);
const seen = [];

const app = createMcpExpressApp();
app.get('/test/seen', (_request, res) => res.json(seen));

const person = request => {
    const header = request.headers.authorization;
    if (!header) return 'nobody';
    const key = header.startsWith('Bearer ') ? header.slice(7) : undefined;
    return (key !== undefined && people.get(key)) || 'unknown';
};

const sessions = new Map();
app.all('/mcp', async (request, res) => {
    const who = person(request);
    if (request.method === 'POST') seen.push(who);
    if (who === 'nobody' || who === 'unknown') {
        res.status(401).json({ jsonrpc: '2.0', error: { code: -32001, message: 'a valid key is needed' }, id: null });
        return;
    }
    const sid = request.headers['mcp-session-id'];
    let entry = sid ? sessions.get(sid) : undefined;
    if (!entry) {
        if (sid || request.method !== 'POST' || !isInitializeRequest(request.body)) {
            res.status(sid ? 404 : 400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
            return;
        }
        const opener = who;
        const transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            onsessioninitialized: id => sessions.set(id, { transport, opener })
        });
        entry = { transport, opener };
        const server = new McpServer({ name: 'per-user-key-fixture', version: '1.0.0' });
        server.registerTool('whoami', { description: 'Whose key carried this call', annotations: { readOnlyHint: true } }, async extra => {
            const header = extra && extra.requestInfo ? extra.requestInfo.headers.authorization : undefined;
            const key = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7) : undefined;
            const caller = (key !== undefined && people.get(key)) || 'unknown';
            return { content: [{ type: 'text', text: `key of ${caller}; session opened by ${opener}` }] };
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
    console.log(`per-user key fixture listening on port ${port}`);
});
