export interface ReplayableBodyOptions {
  /** Bytes kept for replay; a longer body streams through but cannot be replayed. Default 64 KiB. */
  limitBytes?: number;
}

/** Thrown into an attempt's body when the bytes it needs were already dropped. */
export const BODY_NOT_REPLAYABLE = "CLAWGATE_BODY_NOT_REPLAYABLE";

/**
 * A request body that several attempts can send. It reads the client's body lazily, once, and
 * remembers what it read up to `limitBytes`; each `attempt()` replays the remembered chunks and
 * then continues from the client. So a body the first attempt never read (connection refused) is
 * replayable at any size, and one read past the limit is not.
 */
export class ReplayableBody {
  private readonly source: AsyncIterator<Uint8Array>;
  private readonly limitBytes: number;
  private readonly chunks: Uint8Array[] = [];
  /** Index (in read order) of chunks[0]; above 0 once chunks were dropped. */
  private first = 0;
  private read = 0;
  private bytes = 0;
  private done = false;
  private failure: unknown;
  private pulling: Promise<void> | undefined;

  constructor(source: AsyncIterable<Uint8Array>, options: ReplayableBodyOptions = {}) {
    this.source = source[Symbol.asyncIterator]();
    this.limitBytes = options.limitBytes ?? 65_536;
  }

  /** Whether a new attempt could still send the whole body. */
  get replayable(): boolean {
    return this.first === 0 && this.bytes <= this.limitBytes;
  }

  /** Whether the client's body has been read to its end. */
  get complete(): boolean {
    return this.done;
  }

  /** Bytes read from the client so far. */
  get bytesRead(): number {
    return this.bytes;
  }

  /** The body for one attempt, from its first byte; pass it to the upstream request as its body. */
  async *attempt(): AsyncGenerator<Uint8Array, void, undefined> {
    if (!this.replayable) throw notReplayable();
    let index = 0;
    for (;;) {
      // Another attempt read past the limit while this one lagged behind.
      if (index < this.first) throw notReplayable();
      if (index < this.read) {
        yield this.chunks[index - this.first]!;
        index += 1;
        continue;
      }
      if (this.failure !== undefined) throw this.failure;
      if (this.done) return;
      await this.pull();
    }
  }

  /** One read from the client at a time, however many attempts are waiting on it. */
  private pull(): Promise<void> {
    this.pulling ??= this.readOne().finally(() => {
      this.pulling = undefined;
    });
    return this.pulling;
  }

  private async readOne(): Promise<void> {
    try {
      const next = await this.source.next();
      if (next.done) {
        this.done = true;
        return;
      }
      this.bytes += next.value.byteLength;
      // Past the limit only the newest chunk is kept, for the attempt that is streaming it now.
      if (this.bytes > this.limitBytes) {
        this.chunks.length = 0;
        this.first = this.read;
      }
      this.chunks.push(next.value);
      this.read += 1;
    } catch (error) {
      this.failure = error ?? new Error("request body failed");
    }
  }
}

function notReplayable(): Error {
  return Object.assign(new Error("request body is too large to send again"), {
    code: BODY_NOT_REPLAYABLE,
  });
}
