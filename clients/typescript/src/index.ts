// A typed client of the memgpt-rs server: openapi-fetch over the types openapi-typescript
// generates from the server's OpenAPI document (clients/openapi.json; `npm run generate`).
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths };
/** An error body: `{"error": {"code", "message"}}` with a stable code. */
export type ErrorBody = components["schemas"]["ErrorBody"];

/** A client of the server at `baseUrl` (such as `http://127.0.0.1:8283`) with an API key. */
export function memgptClient(baseUrl: string, apiKey: string): Client<paths> {
  return createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${apiKey}` } });
}
