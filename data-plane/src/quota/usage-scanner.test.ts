import { describe, expect, it } from "vitest";
import { usageScannerFor } from "./usage-scanner.js";

/** Feeds `body` in chunks of `size` bytes, as a response arrives. */
function scan(contentType: string, body: string, size = 7): number {
  const scanner = usageScannerFor(contentType);
  if (scanner === undefined) throw new Error("no scanner");
  const bytes = Buffer.from(body);
  for (let i = 0; i < bytes.length; i += size) scanner.push(bytes.subarray(i, i + size));
  return scanner.tokens(0);
}

const openAiJson = JSON.stringify({
  id: "chatcmpl-1",
  choices: [{ message: { content: 'a "usage": {"total_tokens": 999} in text ✓' } }],
  usage: { prompt_tokens: 12, completion_tokens: 30, total_tokens: 42 },
});

describe("usageScannerFor", () => {
  it.each([1, 3, 7, 4096])("reads OpenAI JSON usage in chunks of %i bytes", (size) => {
    expect(scan("application/json; charset=utf-8", openAiJson, size)).toBe(42);
  });

  it("reads Anthropic JSON usage, cache tokens included", () => {
    const body = JSON.stringify({
      type: "message",
      usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 3 },
      content: [{ type: "text", text: "hi" }],
    });
    expect(scan("application/json", body)).toBe(18);
  });

  it("ignores a nested usage key that is not the response's", () => {
    const body = JSON.stringify({ meta: { usage: { total_tokens: 7 } }, data: [] });
    expect(scan("application/json", body)).toBe(0);
  });

  it("reads the final usage chunk of an OpenAI stream", () => {
    const body = [
      'data: {"choices":[{"delta":{"content":"hel"}}]}',
      'data: {"choices":[{"delta":{"content":"lo"}}]}',
      'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}',
      "data: [DONE]",
      "",
    ].join("\n\n");
    expect(scan("text/event-stream", body, 5)).toBe(11);
  });

  it("keeps Anthropic's latest output total instead of adding the deltas", () => {
    const body = [
      "event: message_start",
      'data: {"type":"message_start","message":{"usage":{"input_tokens":25,"output_tokens":1}}}',
      "",
      "event: message_delta",
      'data: {"type":"message_delta","usage":{"output_tokens":10}}',
      "",
      "event: message_delta",
      'data: {"type":"message_delta","usage":{"output_tokens":15}}',
      "",
    ].join("\r\n");
    expect(scan("text/event-stream", body, 11)).toBe(40);
  });

  it("reads the Responses API's response.completed event", () => {
    const body =
      'data: {"type":"response.completed","response":{"usage":{"input_tokens":4,"output_tokens":6,"total_tokens":10}}}\n\n';
    expect(scan("text/event-stream", body)).toBe(10);
  });

  it("skips an overlong line without keeping it, and still reads the usage after it", () => {
    const big = `data: {"choices":[{"delta":{"content":"${"x".repeat(100_000)}"}}],"usage":null}`;
    const body = `${big}\n\ndata: {"usage":{"total_tokens":3}}\n\n`;
    expect(scan("text/event-stream", body, 1000)).toBe(3);
  });

  it.each([1, 1000, 65536])(
    "reads usage from a response.completed event over 16 KiB in chunks of %i bytes",
    (size) => {
      // The whole response rides on the event: output text, instructions, tools.
      const completed = JSON.stringify({
        type: "response.completed",
        response: {
          instructions: 'say "usage": {"total_tokens": 1} \\ ✓',
          output: [{ content: [{ type: "output_text", text: "x".repeat(20_000) }] }],
          usage: { input_tokens: 10, output_tokens: 5000, total_tokens: 5010 },
        },
      });
      const body = `event: response.completed\r\ndata: ${completed}\r\n\r\n`;
      expect(scan("text/event-stream", body, size)).toBe(5010);
    },
  );

  it("reads message.usage and usage from overlong Anthropic events, not usage nested deeper", () => {
    const start = JSON.stringify({
      type: "message_start",
      message: { content: [{ usage: { input_tokens: 999 } }], usage: { input_tokens: 25 } },
      padding: "p".repeat(20_000),
    });
    const delta = JSON.stringify({
      type: "message_delta",
      delta: { text: "d".repeat(20_000), usage: { output_tokens: 999 } },
      usage: { output_tokens: 15 },
    });
    expect(scan("text/event-stream", `data: ${start}\n\ndata: ${delta}\n\n`, 333)).toBe(40);
  });

  // A stream without its final usage is charged from the text it carried (no prompt here):
  // max(ceil(content bytes / 4), content events), in every known stream format.
  it.each([
    [
      "chat deltas, a role-only first chunk and [DONE] not counted",
      [
        { choices: [{ delta: { role: "assistant", content: "" } }] },
        { choices: [{ delta: { content: "abcdefgh" } }] },
        { choices: [{ delta: { reasoning_content: "abcdefgh" } }] },
      ],
      4,
    ],
    [
      "tool-call arguments",
      [{ choices: [{ delta: { tool_calls: [{ function: { arguments: '{"city":"Paris"}' } }] } }] }],
      4,
    ],
    ["legacy completions' text", [{ choices: [{ text: "hello world!" }] }], 3],
    [
      "the Responses API's delta events",
      [
        { type: "response.created", response: { usage: null } },
        { type: "response.output_text.delta", delta: "ab" },
        { type: "response.output_text.delta", delta: "cd" },
      ],
      2,
    ],
    [
      "Anthropic's content_block_delta, not message_delta's stop reason",
      [
        { type: "content_block_delta", delta: { type: "thinking_delta", thinking: "hmm" } },
        { type: "content_block_delta", delta: { type: "input_json_delta", partial_json: "{}" } },
        { type: "message_delta", delta: { stop_reason: "end_turn_with_a_long_name" } },
      ],
      2,
    ],
  ])("estimates a stream cut before its usage from %s", (_what, events, expected) => {
    const body = `${events.map((e) => `data: ${JSON.stringify(e)}`).join("\n\n")}\n\ndata: [DONE]\n\n`;
    expect(scan("text/event-stream", body, 9)).toBe(expected);
  });

  it("counts a content line too long to parse by its bytes", () => {
    const big = `data: {"choices":[{"delta":{"content":"${"x".repeat(40_000)}"}}],"usage":null}\n\n`;
    const tokens = scan("text/event-stream", big, 1000);
    expect(tokens).toBe(Math.ceil((Buffer.byteLength(big) - "data:\n\n".length) / 4));
  });

  it("has no scanner for bodies that carry no usage", () => {
    expect(usageScannerFor("text/html")).toBeUndefined();
    expect(usageScannerFor(undefined)).toBeUndefined();
  });
});
