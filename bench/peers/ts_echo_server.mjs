// The benchmark's third peer: an `echo` server built with the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk 1.x, installed by `bash scripts/install_js_peers.sh` into
// tests/js/node_modules). Uses the SDK's high-level API (McpServer + a zod input schema).
//
//     node bench/peers/ts_echo_server.mjs --transport stdio
//     node bench/peers/ts_echo_server.mjs --transport http --port 8002   # /mcp, 127.0.0.1 only
//
// HTTP is the SDK's StreamableHTTPServerTransport on node's `http` module, stateful: one
// transport + McpServer per session (as the SDK's examples do), keyed by Mcp-Session-Id.
// Responses use the SDK default (SSE), like the Python SDK peer.

import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { parseArgs } from 'node:util';

// Bare specifiers would not resolve from bench/, so import by path into tests/js/node_modules.
const NM = new URL('../../tests/js/node_modules/', import.meta.url);
const SDK = new URL('@modelcontextprotocol/sdk/dist/esm/', NM);
const { McpServer } = await import(new URL('server/mcp.js', SDK).href);
const { StdioServerTransport } = await import(new URL('server/stdio.js', SDK).href);
const { StreamableHTTPServerTransport } = await import(new URL('server/streamableHttp.js', SDK).href);
const { isInitializeRequest } = await import(new URL('types.js', SDK).href);
const { z } = await import(new URL('zod/index.js', NM).href);

function buildServer() {
    const server = new McpServer({ name: 'ts-echo', version: '1.0.0' });
    server.registerTool(
        'echo',
        { description: 'Return the text unchanged.', inputSchema: { text: z.string() } },
        async ({ text }) => ({ content: [{ type: 'text', text }] }),
    );
    return server;
}

const { values: args } = parseArgs({
    options: {
        transport: { type: 'string', default: 'stdio' },
        port: { type: 'string', default: '8002' },
    },
});

function sendError(res, status, message) {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

async function readJson(req) {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function runHttp(host, port) {
    const transports = new Map(); // session id -> transport
    const httpServer = http.createServer(async (req, res) => {
        try {
            const url = new URL(req.url, `http://${req.headers.host ?? host}`);
            if (url.pathname !== '/mcp') return sendError(res, 404, 'Not Found');
            const sid = req.headers['mcp-session-id'];
            if (req.method !== 'POST') {
                const t = sid && transports.get(sid);
                if (!t) return sendError(res, 400, 'Bad Request: no valid session ID');
                return await t.handleRequest(req, res);
            }
            let body;
            try {
                body = await readJson(req);
            } catch {
                return sendError(res, 400, 'Parse error');
            }
            let transport = sid ? transports.get(sid) : undefined;
            if (!transport) {
                if (sid || !isInitializeRequest(body)) {
                    return sendError(res, sid ? 404 : 400, 'Bad Request: no valid session ID');
                }
                transport = new StreamableHTTPServerTransport({
                    sessionIdGenerator: () => randomUUID(),
                    onsessioninitialized: (id) => { transports.set(id, transport); },
                });
                transport.onclose = () => {
                    if (transport.sessionId) transports.delete(transport.sessionId);
                };
                await buildServer().connect(transport);
            }
            await transport.handleRequest(req, res, body);
        } catch (err) {
            if (!res.headersSent) sendError(res, 500, String(err));
        }
    });
    await new Promise((resolve) => httpServer.listen(port, host, resolve));
    const shutdown = () => {
        for (const t of transports.values()) t.close().catch(() => {});
        httpServer.close();
        process.exit(0);
    };
    process.on('SIGTERM', shutdown);
    process.on('SIGINT', shutdown);
}

if (args.transport === 'stdio') {
    await buildServer().connect(new StdioServerTransport());
} else if (args.transport === 'http') {
    await runHttp('127.0.0.1', Number(args.port)); // loopback only, by design
} else {
    console.error(`unknown --transport ${args.transport}`);
    process.exit(2);
}
