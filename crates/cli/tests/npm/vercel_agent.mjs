// A Vercel AI SDK agent (`ai` generateText) with toolgate's tools from `@ai-sdk/mcp` over its
// stdio transport, for crates/cli/tests/it/clients.rs. The test copies this file next to a
// `node_modules` link to the npm peers.
//
// Usage: node vercel_agent.mjs SCRIPT_JSON PAGE_URL TOOLGATE WORKSPACE. The model is a scripted
// LanguageModelV3 that makes the scripted calls one per step and records the tool-result parts of
// the prompt it is handed (what a provider would send). Then `client.close()` (the SDK ends the
// child with SIGTERM), and the report says whether toolgate exited. Prints {"records": [...],
// "output", "exit"} as JSON on its last line, and exits by itself: a toolgate still running 5 s
// after the close is killed with SIGKILL (reported as such), so nothing keeps Node alive.

import { createMCPClient } from '@ai-sdk/mcp';
import { Experimental_StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';
import { generateText, stepCountIs } from 'ai';

const [script, pageUrl, toolgate, workspace] = [JSON.parse(process.argv[2]), ...process.argv.slice(3)];
const records = [];

const model = {
  specificationVersion: 'v3',
  provider: 'scripted',
  modelId: 'scripted',
  supportedUrls: {},
  async doGenerate({ prompt, tools }) {
    const results = prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content)
      .filter((p) => p.type === 'tool-result');
    for (const part of results.slice(records.length)) {
      records.push({ api: 'ai-sdk', tool: part.toolName, call_id: part.toolCallId, content: part.output });
    }
    const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
      outputTokens: { total: 5, text: 5, reasoning: 0 } };
    const text = (t) => ({ content: [{ type: 'text', text: t }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] });
    if (results.length >= script.length) return text('All five tools answered.');
    const step = script[results.length];
    const offered = (tools ?? []).map((t) => t.name);
    if (!offered.includes(step.tool)) return text(`The tool ${step.tool} is not offered (offered: ${offered}).`);
    const input = JSON.stringify(step.args).replaceAll('{PAGE_URL}', pageUrl);
    return {
      content: [{ type: 'tool-call', toolCallId: `call_step${results.length}`, toolName: step.tool, input }],
      finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [],
    };
  },
  async doStream() {
    throw new Error('not used: generateText calls doGenerate');
  },
};

const transport = new Experimental_StdioMCPTransport({ command: toolgate, args: ['--workspace', workspace, 'serve'] });
const client = await createMCPClient({ transport });
const child = transport.process;
const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));

const result = await generateText({
  model,
  tools: await client.tools(),
  stopWhen: stepCountIs(script.length + 2),
  prompt: 'Read notes.txt, grep for PELICAN, list and glob the files, fetch the page.',
});

await client.close();
const timeout = new Promise((resolve) => setTimeout(resolve, 5000, null).unref());
let exit = await Promise.race([exited, timeout]);
if (exit === null) {
  child.kill('SIGKILL');
  exit = { killed_after_5s: true, ...(await exited) };
}
console.log(JSON.stringify({ records, output: result.text, exit }));
