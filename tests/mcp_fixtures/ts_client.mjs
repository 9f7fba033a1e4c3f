// An MCP client nobody here wrote: the TypeScript SDK's (npm @modelcontextprotocol/sdk),
// driven line by line by tests/test_mcp_typescript.py.
//
//   node ts_client.mjs SDK_DIR stdio '["python", "-m", "toolseam.mcp", "serve", ...]'
//   node ts_client.mjs SDK_DIR http URL
//
// Commands on stdin, one JSON object a line; events on stdout, one JSON object a line:
//   {"op": "echo", "text": T}      -> {"event": "echo", "text": ...}
//   {"op": "call", "tag": T}       calls wait_for_abort with an AbortSignal of its own
//   {"op": "abort", "tag": T}      aborts that call's signal (the SDK sends
//                                  notifications/cancelled)
//   {"op": "overtake", "tag": T}   calls wait_for_abort, holds the request in the transport,
//                                  aborts its signal, and lets the request go only once the
//                                  SDK's notifications/cancelled has been sent: the
//                                  cancellation overtakes its call on the wire
//   {"op": "quit"}                 closes the client and exits
// Each call ends with {"event": "settled", "tag": T, "outcome": "aborted" | "result", ...}.

import { createInterface } from "node:readline";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, kind, target] = process.argv.slice(2);
const load = (path) => import(pathToFileURL(join(sdkDir, "dist", "esm", path)).href);
const { Client } = await load("client/index.js");

const emit = (event) => process.stdout.write(JSON.stringify(event) + "\n");

let transport;
if (kind === "stdio") {
  const { StdioClientTransport } = await load("client/stdio.js");
  const [command, ...args] = JSON.parse(target);
  transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
} else {
  const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
  transport = new StreamableHTTPClientTransport(new URL(target));
}

// Requests to hold until their cancellation has been sent: request id -> release().
const overtaking = new Set(); // tags whose call is to be overtaken
const held = new Map();
const send = transport.send.bind(transport);
transport.send = async (message, options) => {
  const tag = message.method === "tools/call" ? message.params?.arguments?.tag : undefined;
  if (tag !== undefined && overtaking.has(tag)) {
    overtaking.delete(tag);
    await new Promise((release) => {
      held.set(message.id, release);
      calls.get(tag).abort("overtaken"); // the SDK now sends notifications/cancelled
    });
    return send(message, options);
  }
  if (message.method === "notifications/cancelled" && held.has(message.params.requestId)) {
    const release = held.get(message.params.requestId);
    held.delete(message.params.requestId);
    await send(message, options); // delivered (over HTTP: answered 202) before the call
    release();
    return;
  }
  return send(message, options);
};

const client = new Client({ name: "toolseam-ts-test", version: "0" });
await client.connect(transport);
emit({ event: "ready", protocolVersion: transport.protocolVersion ?? null });

const calls = new Map(); // tag -> AbortController
const pending = new Set();

function call(tag) {
  const controller = new AbortController();
  calls.set(tag, controller);
  const settled = client
    .callTool({ name: "wait_for_abort", arguments: { tag } }, undefined, {
      signal: controller.signal,
    })
    .then(
      (result) => emit({ event: "settled", tag, outcome: "result", result }),
      (error) => emit({
        event: "settled",
        tag,
        outcome: controller.signal.aborted ? "aborted" : "error",
        error: String(error),
      }),
    );
  pending.add(settled);
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  if (command.op === "echo") {
    const result = await client.callTool({ name: "echo", arguments: { text: command.text } });
    emit({ event: "echo", text: result.content[0].text });
  } else if (command.op === "call") {
    call(command.tag);
  } else if (command.op === "abort") {
    calls.get(command.tag).abort("stop");
  } else if (command.op === "overtake") {
    overtaking.add(command.tag);
    call(command.tag);
  } else if (command.op === "quit") {
    break;
  }
}
await Promise.all(pending);
await client.close();
emit({ event: "closed" });
process.exit(0); // stdin stays open: the test closes it only with the process
