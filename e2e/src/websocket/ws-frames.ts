import { createHash, randomBytes } from "node:crypto";

/** RFC 6455 section 1.3: the Sec-WebSocket-Accept answer to a Sec-WebSocket-Key. */
export function acceptKey(key: string): string {
  return createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC11B65`).digest("base64");
}

/** A text frame, masked as a client must send it (payloads under 126 bytes). */
export function maskedText(text: string): Buffer {
  const payload = Buffer.from(text);
  if (payload.length > 125) throw new RangeError("maskedText: payload over 125 bytes");
  const mask = randomBytes(4);
  const out = Buffer.alloc(6 + payload.length);
  out[0] = 0x81;
  out[1] = 0x80 | payload.length;
  mask.copy(out, 2);
  for (let i = 0; i < payload.length; i++) out[6 + i] = payload[i]! ^ mask[i % 4]!;
  return out;
}

export interface Frame {
  opcode: number;
  payload: Buffer;
}

/**
 * Frames read from a byte stream, masked or not (payloads under 64 KiB); `rest` is what is
 * left of an incomplete frame.
 */
export function readFrames(bytes: Buffer): { frames: Frame[]; rest: Buffer } {
  const frames: Frame[] = [];
  let at = 0;
  while (bytes.length - at >= 2) {
    const opcode = bytes[at]! & 0x0f;
    const masked = (bytes[at + 1]! & 0x80) !== 0;
    let length = bytes[at + 1]! & 0x7f;
    let header = 2;
    if (length === 126) {
      if (bytes.length - at < 4) break;
      length = bytes.readUInt16BE(at + 2);
      header = 4;
    }
    const maskAt = at + header;
    if (masked) header += 4;
    if (bytes.length - at < header + length) break;
    const payload = Buffer.from(bytes.subarray(at + header, at + header + length));
    if (masked) for (let i = 0; i < length; i++) payload[i]! ^= bytes[maskAt + (i % 4)]!;
    frames.push({ opcode, payload });
    at += header + length;
  }
  return { frames, rest: bytes.subarray(at) };
}

/** A text frame as a server sends it (unmasked, payload under 64 KiB). */
export function serverText(payload: Buffer): Buffer {
  const head =
    payload.length < 126
      ? Buffer.from([0x81, payload.length])
      : Buffer.from([0x81, 126, payload.length >> 8, payload.length & 0xff]);
  return Buffer.concat([head, payload]);
}
