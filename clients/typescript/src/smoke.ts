// A whole session through the TypeScript client, against a running `memgpt serve` whose model
// answers with `send_message`: what tests/integration/contract.rs runs.
// Usage: MEMGPT_URL=http://... MEMGPT_ADMIN_KEY=... node dist/smoke.js
import assert from "node:assert/strict";
import { memgptClient } from "./index.js";

const url = process.env.MEMGPT_URL!;
const admin = memgptClient(url, process.env.MEMGPT_ADMIN_KEY!);

// A tenant and its key, with the admin key.
const tenant = await admin.POST("/v1/admin/tenants", { body: { name: "typescript-smoke" } });
assert.equal(tenant.response.status, 201);
const key = await admin.POST("/v1/admin/tenants/{tenant_id}/keys", {
  params: { path: { tenant_id: tenant.data!.id } },
  body: { name: "smoke" },
});
const client = memgptClient(url, key.data!.key);

const agent = await client.POST("/v1/agents", { body: { name: "ts", persona: "I am terse." } });
assert.equal(agent.response.status, 201, JSON.stringify(agent.error));
const agent_id = agent.data!.id;
const path = { params: { path: { agent_id } } };

const step = await client.POST("/v1/agents/{agent_id}/messages", { ...path, body: { text: "Hi, I keep bees." } });
assert.deepEqual(step.data!.replies, ["Noted."]);

// Streamed: Server-Sent Events, read as text.
const stream = await client.POST("/v1/agents/{agent_id}/messages/stream", {
  ...path,
  body: { text: "And goats." },
  parseAs: "text",
});
const events = String(stream.data)
  .split("\n\n")
  .map((block) => Object.fromEntries(block.split("\n").map((line) => [line.split(": ")[0], line.slice(line.indexOf(": ") + 2)])))
  .filter((event) => event.event);
const last = events[events.length - 1];
assert.equal(last.event, "step");
assert.deepEqual(JSON.parse(last.data).replies, ["Noted."]);

const context = await client.GET("/v1/agents/{agent_id}/context", path);
assert.ok(context.data!.messages.some((m) => m.content.includes("I keep bees.")));
const blocks = await client.GET("/v1/agents/{agent_id}/memory", path);
assert.ok(blocks.data!.blocks.some((b) => b.label === "persona"));

const inserted = await client.POST("/v1/agents/{agent_id}/archival", { ...path, body: { text: "The hives are on the hill." } });
assert.equal(inserted.data!.ids.length, 1);
const listed = await client.GET("/v1/agents/{agent_id}/archival", path);
assert.equal(listed.data!.total, 1);
const found = await client.POST("/v1/agents/{agent_id}/archival/search", { ...path, body: { query: "hives" } });
assert.ok(found.data!.items[0].text.includes("hill"));
const recalled = await client.POST("/v1/agents/{agent_id}/recall/search", { ...path, body: { query: "goats" } });
assert.ok(recalled.data!.items.some((hit) => hit.text.includes("goats")));

const deleted = await client.DELETE("/v1/agents/{agent_id}", path);
assert.equal(deleted.response.status, 204);
const missing = await client.GET("/v1/agents/{agent_id}", path);
assert.equal(missing.response.status, 404);
assert.equal(missing.error!.error.code, "not_found");

console.log("typescript client: ok");
