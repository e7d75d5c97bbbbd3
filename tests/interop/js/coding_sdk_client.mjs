// The official TypeScript SDK client uses every tool of `mcpkit serve`; prints a JSON summary.
//
//   node coding_sdk_client.mjs stdio <python> [server args...]   (spawns the server over stdio)
//   node coding_sdk_client.mjs http <url> <token>                (Streamable HTTP, bearer token)
//   node coding_sdk_client.mjs http-noauth <url>                 (expects the connection to fail)
//
// The scenario only records what each call returned; tests/interop/test_coding_sdk_clients.py
// checks the results and their effects on disk. Imports the SDK from tests/js/node_modules by
// relative path (ESM ignores NODE_PATH).
const SDK = new URL("../../js/node_modules/@modelcontextprotocol/sdk/dist/esm/", import.meta.url);
const { Client } = await import(new URL("client/index.js", SDK));
const { StdioClientTransport } = await import(new URL("client/stdio.js", SDK));
const { StreamableHTTPClientTransport } = await import(new URL("client/streamableHttp.js", SDK));
const { CreateMessageRequestSchema } = await import(new URL("types.js", SDK));

const [mode, target, ...rest] = process.argv.slice(2);
const overall = setTimeout(() => {
  process.stderr.write("coding_sdk_client: timed out\n");
  process.exit(3);
}, 20000);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const client = new Client(
  { name: "mcpkit-coding-interop-ts", version: "1.0.0" },
  { capabilities: { sampling: { tools: {} } } },
);
// The "model" behind `agent`: first a glob tool_use, then a text quoting the tool's result.
const AGENT_SAYS = "The sub-agent's glob found:";
client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
  const last = request.params.messages.at(-1).content;
  const results = (Array.isArray(last) ? last : [last]).filter((b) => b.type === "tool_result");
  if (results.length === 0) {
    return {
      role: "assistant", model: "interop-model", stopReason: "toolUse",
      content: [{ type: "tool_use", id: "use-1", name: "glob", input: { pattern: "**/*.py" } }],
    };
  }
  const found = results.flatMap((r) => r.content ?? []).map((c) => c.text ?? "").join("");
  return {
    role: "assistant", model: "interop-model", stopReason: "endTurn",
    content: { type: "text", text: `${AGENT_SAYS} ${found}` },
  };
});

let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: target, args: rest, stderr: "inherit" });
} else {
  const headers = mode === "http" ? { Authorization: `Bearer ${rest[0]}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
}

const out = { calls: [] };
const call = async (name, args) => {
  const result = await client.callTool({ name, arguments: args });
  const record = {
    name,
    args,
    isError: Boolean(result.isError),
    text: (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join(""),
    structured: result.structuredContent ?? null,
  };
  out.calls.push(record);
  return record;
};

try {
  if (mode === "http-noauth") {
    try {
      await client.connect(transport);
      out.connected = true;
    } catch (err) {
      out.connected = false;
      out.connectError = String(err?.message ?? err);
      out.connectCode = err?.code ?? null;  // StreamableHTTPError carries the HTTP status
    }
    out.ok = true;
  } else {
    await client.connect(transport);
    out.protocolVersion = transport.protocolVersion ?? null;
    out.serverName = client.getServerVersion()?.name;
    out.tools = (await client.listTools()).tools.map((t) => ({
      name: t.name, inputSchema: t.inputSchema ?? null,
    }));

    await call("view", { file_path: "hello.txt" });
    await call("read", { file_path: "hello.txt", offset: 2, limit: 1 });
    await call("write", { file_path: "sdk/new.py", content: "x = 1\n" });
    await call("view", { file_path: "sdk/new.py" });
    await call("edit", { file_path: "sdk/new.py", old_string: "x = 1", new_string: "x = 2" });
    await call("patch", {
      diff: "--- a/sdk/new.py\n+++ b/sdk/new.py\n@@ -1 +1,2 @@\n x = 2\n+y = 3\n",
    });
    await call("glob", { pattern: "**/*.py" });
    await call("grep", { pattern: "y = 3" });
    await call("ls", { path: "sdk" });
    const listed = new Set(out.tools.map((t) => t.name));
    if (listed.has("diagnostics")) await call("diagnostics", { file_path: "broken.py" });
    if (listed.has("fetch")) {
      await call("fetch", { url: process.env.MCPKIT_INTEROP_FETCH_URL, format: "json" });
    }
    if (listed.has("agent")) {
      await call("agent", { prompt: "List the Python files.", description: "find py" });
    }
    await call("bash", { command: "echo hi; echo $((6 * 7)) > sdk/bash.txt" });

    const started = await call("bash", {
      command: "echo started; exec sleep 100", run_in_background: true,
    });
    const jobId = started.structured?.job_id;
    out.jobPid = started.structured?.pid ?? null;
    const deadline = Date.now() + 5000;
    let seen = "";
    while (Date.now() < deadline) {
      const polled = await call("bash_output", { job_id: jobId });
      seen += polled.text;
      if (polled.isError || seen.includes("started")) break;
      await sleep(50);
    }
    out.jobOutput = seen;
    await call("bash_kill", { job_id: jobId });
    await call("bash_output", { job_id: jobId });
    // Left running on purpose: stopping the server must stop it too.
    const leftover = await call("bash", { command: "exec sleep 100", run_in_background: true });
    out.leftoverPid = leftover.structured?.pid ?? null;
    out.ok = true;
  }
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
