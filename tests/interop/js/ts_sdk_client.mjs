// The official TypeScript SDK client against an mcpkit server; prints a JSON summary on stdout.
//
//   node ts_sdk_client.mjs stdio <python> [server args...]   (spawns the server over stdio)
//   node ts_sdk_client.mjs http <url>                        (Streamable HTTP)
//
// Imports the SDK from tests/js/node_modules by relative path (ESM ignores NODE_PATH).
const SDK = new URL("../../js/node_modules/@modelcontextprotocol/sdk/dist/esm/", import.meta.url);
const { Client } = await import(new URL("client/index.js", SDK));
const { StdioClientTransport } = await import(new URL("client/stdio.js", SDK));
const { StreamableHTTPClientTransport } = await import(new URL("client/streamableHttp.js", SDK));
const { CreateMessageRequestSchema, ElicitRequestSchema } = await import(new URL("types.js", SDK));

const [mode, target, ...rest] = process.argv.slice(2);
const overall = setTimeout(() => {
  process.stderr.write("ts_sdk_client: timed out\n");
  process.exit(3);
}, 20000);

const text = (result) => {
  if (result.isError) throw new Error(`tool error: ${JSON.stringify(result)}`);
  return result.content.filter((c) => c.type === "text").map((c) => c.text).join("");
};

const client = new Client(
  { name: "mcpkit-interop-ts", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: {} } },
);
const seen = { sampling: [], elicitation: [] };
client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
  seen.sampling.push(request.params.messages.length);
  return { role: "assistant", content: { type: "text", text: "four" }, model: "interop-model" };
});
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  seen.elicitation.push(request.params.message);
  return { action: "accept", content: { username: "alice", email: "alice@example.com" } };
});

let negotiated = null;
const transport = mode === "stdio"
  ? new StdioClientTransport({ command: target, args: rest, stderr: "inherit" })
  : new StreamableHTTPClientTransport(new URL(target));

const out = {};
try {
  const origSetVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => { negotiated = v; origSetVersion?.(v); };
  await client.connect(transport);
  out.protocolVersion = transport.protocolVersion ?? negotiated;
  out.serverName = client.getServerVersion()?.name;
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  out.simpleText = text(await client.callTool({ name: "test_simple_text", arguments: {} }));
  const progress = [];
  out.progressResult = text(await client.callTool(
    { name: "test_tool_with_progress", arguments: {} }, undefined,
    { onprogress: (p) => progress.push([p.progress, p.total ?? null, p.message ?? null]) },
  ));
  out.progress = progress;
  out.sampling = text(await client.callTool({ name: "test_sampling", arguments: { prompt: "What is 2+2?" } }));
  out.elicitation = text(await client.callTool({ name: "test_elicitation", arguments: { message: "Who are you?" } }));
  out.seen = seen;
  out.static = (await client.readResource({ uri: "test://static-text" })).contents;
  out.template = (await client.readResource({ uri: "test://template/42/data" })).contents;
  out.simplePrompt = (await client.getPrompt({ name: "test_simple_prompt" })).messages.map((m) => m.content.text);
  out.argsPrompt = (await client.getPrompt({
    name: "test_prompt_with_arguments", arguments: { arg1: "one", arg2: "two" },
  })).messages.map((m) => m.content.text);
  out.ok = true;
} catch (err) {
  out.ok = false;
  out.error = String(err?.stack ?? err);
} finally {
  try {
    if (mode === "http" && transport.sessionId) await transport.terminateSession();
  } catch { /* best effort */ }
  await client.close().catch(() => {});
  clearTimeout(overall);
}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(out.ok ? 0 : 1);
