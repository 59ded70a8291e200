import { once } from "node:events";
import { connect } from "node:net";

export interface RawHttpReply {
  /** Status code of the first response, 0 when none arrived. */
  status: number;
  /** Status line and header lines, as received. */
  head: string;
  body: string;
}

/**
 * One HTTP/1.1 request written byte for byte on a fresh TCP connection: fetch and node:http
 * refuse what hostile-input tests must send (two Host lines, a Host with a bad port, header
 * names like "constructor" kept as typed). `lines` are the request line and header lines;
 * "Connection: close" is added, then `body` (default none) as typed, and the reply is read until
 * the server closes. Bounded by `timeoutMs` (default 10 s): a server that never answers gives
 * status 0 instead of a hang.
 */
export async function rawHttpRequest(
  address: string,
  lines: readonly string[],
  timeoutMs = 10_000,
  body = "",
): Promise<RawHttpReply> {
  const colon = address.lastIndexOf(":");
  const socket = connect(Number(address.slice(colon + 1)), address.slice(0, colon));
  socket.setTimeout(timeoutMs, () => socket.destroy());
  socket.setEncoding("utf8");
  let text = "";
  socket.on("data", (chunk: string) => {
    text += chunk;
  });
  // A reset or refusal ends the exchange like a close; the status then says what arrived.
  socket.on("error", () => {});
  socket.write(`${[...lines, "Connection: close"].join("\r\n")}\r\n\r\n${body}`);
  await once(socket, "close");
  const split = text.indexOf("\r\n\r\n");
  const head = split < 0 ? text : text.slice(0, split);
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
  return { status, head, body: split < 0 ? "" : text.slice(split + 4) };
}
