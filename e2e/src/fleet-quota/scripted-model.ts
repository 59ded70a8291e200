import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * A scripted OpenAI-style model: a path ending in /json answers a chat completion with its
 * usage, one ending in /sse streams content chunks and then the final usage chunk, each write a
 * separate chunk on the wire. Either reports 60 tokens; anything else answers "ok" and no usage.
 */
export function scriptedModel(req: IncomingMessage, res: ServerResponse): void {
  const path = (req.url ?? "").split("?")[0]!;
  if (path.endsWith("/json")) {
    res.setHeader("content-type", "application/json");
    res.end(
      JSON.stringify({
        id: "chatcmpl-1",
        choices: [{ index: 0, message: { role: "assistant", content: "hi" } }],
        usage: { prompt_tokens: 20, completion_tokens: 40, total_tokens: 60 },
      }),
    );
    return;
  }
  if (path.endsWith("/sse")) {
    res.setHeader("content-type", "text/event-stream");
    res.write('data: {"choices":[{"index":0,"delta":{"content":"hel"}}]}\n\n');
    res.write('data: {"choices":[{"index":0,"delta":{"content":"lo"}}]}\n\n');
    res.write('data: {"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":40,');
    res.write('"total_tokens":60}}\n\ndata: [DONE]\n\n');
    res.end();
    return;
  }
  res.end("ok");
}
