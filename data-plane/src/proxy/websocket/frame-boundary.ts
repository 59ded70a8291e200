/**
 * Whether the bytes relayed one way through a tunnel end on a WebSocket frame boundary
 * (RFC 6455 5.2): a close frame written anywhere else would land inside the frame being
 * relayed and corrupt it. Reads only the frame headers (2 to 14 bytes each) and skips the
 * payloads, so a chunk costs a few comparisons per frame in it.
 */
export class FrameBoundary {
  readonly #header = Buffer.alloc(14);
  #headerBytes = 0;
  #payloadLeft = 0;

  /** True when every frame relayed so far was relayed whole. */
  get atBoundary(): boolean {
    return this.#headerBytes === 0 && this.#payloadLeft === 0;
  }

  feed(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.#payloadLeft > 0) {
        const take = Math.min(this.#payloadLeft, chunk.length - i);
        this.#payloadLeft -= take;
        i += take;
        continue;
      }
      this.#header[this.#headerBytes++] = chunk[i++]!;
      if (this.#headerBytes < 2) continue;
      const header = this.#header;
      const length7 = header[1]! & 0x7f;
      const size =
        2 + (length7 === 126 ? 2 : length7 === 127 ? 8 : 0) + (header[1]! & 0x80 ? 4 : 0);
      if (this.#headerBytes < size) continue;
      this.#payloadLeft =
        length7 === 126
          ? header.readUInt16BE(2)
          : length7 === 127
            ? Number(header.readBigUInt64BE(2))
            : length7;
      this.#headerBytes = 0;
    }
  }
}
