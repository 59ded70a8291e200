import { createServer, type IncomingHttpHeaders } from "node:http";

export interface StreamingModel {
  address: string;
  /** The JSON body of every request received, in order. */
  readonly bodies: Record<string, unknown>[];
  /** The headers of every request received, in the same order: how each body was framed. */
  readonly headers: IncomingHttpHeaders[];
  close(): Promise<void>;
}

/**
 * A scripted OpenAI-style chat model that streams as OpenAI does: content chunks, then, only
 * when the request asked for `stream_options: { include_usage: true }`, a final chunk with
 * `choices: []` and the usage (60 tokens), then `data: [DONE]`. Each write is its own chunk on
 * the wire. Records each request's body and headers, so a test sees what the gateway sent
 * upstream and how. On a path with a `/hold/` segment it stops after the content chunks and
 * sends nothing more until the gateway closes the connection (a client that cuts the stream
 * before its usage chunk); with `/break/` it cuts the connection there itself.
 */
export async function startStreamingModel(): Promise<StreamingModel> {
  const bodies: Record<string, unknown>[] = [];
  const headers: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      if (req.url === "/healthz") {
        res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString() || "{}") as Record<string, unknown>;
      bodies.push(body);
      headers.push(req.headers);
      const options = body.stream_options as { include_usage?: boolean } | undefined;
      const usage = options?.include_usage === true;
      res.writeHead(200, { "content-type": "text/event-stream" });
      const field = usage ? ',"usage":null' : "";
      res.write(`data: {"choices":[{"index":0,"delta":{"content":"hel"}}]${field}}\n\n`);
      const last = `data: {"choices":[{"index":0,"delta":{"content":"lo"}}]${field}}\n\n`;
      if (req.url?.includes("/hold/")) {
        res.write(last);
        return;
      }
      if (req.url?.includes("/break/")) {
        // Once the content is on the wire: a model server that dies mid-answer.
        res.write(last, () => res.socket?.destroy());
        return;
      }
      res.write(last);
      if (usage) {
        res.write('data: {"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":40,');
        res.write('"total_tokens":60}}\n\n');
      }
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return {
    address: `127.0.0.1:${address.port}`,
    bodies,
    headers,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
