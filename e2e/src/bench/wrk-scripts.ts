import { writeFile } from "node:fs/promises";
import { join } from "node:path";

/** Bytes of the POST body in the second table: the largest body a retrying route replays. */
export const POST_BODY_BYTES = 65_536;

/** Writes the wrk Lua script that sends every request as a POST of POST_BODY_BYTES. */
export async function writePostScript(dir: string): Promise<string> {
  const file = join(dir, "post-64k.lua");
  await writeFile(
    file,
    `wrk.method = "POST"
wrk.body = string.rep("x", ${POST_BODY_BYTES})
wrk.headers["Content-Type"] = "application/octet-stream"
`,
  );
  return file;
}

/** Events in the SSE response of the third table. */
export const SSE_EVENTS = 100;

/** An SSE stream of `count` events, safe inside an nginx single-quoted string. */
export function sseBody(count: number): string {
  let body = "";
  for (let i = 1; i <= count; i++) body += `id: ${i}\\nevent: tick\\ndata: {"n":${i}}\\n\\n`;
  return body;
}
