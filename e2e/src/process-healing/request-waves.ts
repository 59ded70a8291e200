import { Agent, request } from "undici";

/** One request: which wave it belonged to, and how it ended. */
export interface WaveRequest {
  wave: number;
  status?: number;
  /** The Connection response header, when the server sent one. */
  connection?: string;
  error?: string;
}

export interface RequestWaves {
  readonly requests: readonly WaveRequest[];
  /** Waves fully answered so far. */
  readonly completedWaves: number;
  /** The wave being sent now. */
  readonly currentWave: number;
  /** Stops after the current wave and waits for it. */
  stop(): Promise<void>;
}

/**
 * A steady stream in waves: `size` concurrent GETs over keep-alive connections, the next wave
 * once all have ended. While a wave is out every connection is busy, so a signal sent then
 * finds no idle connection to race with: each request of that wave is provably in flight.
 */
export function startRequestWaves(url: string, size: number): RequestWaves {
  const agent = new Agent({ connections: size, keepAliveTimeout: 30_000 });
  const requests: WaveRequest[] = [];
  let running = true;
  let completedWaves = 0;
  let currentWave = 0;
  const one = async (wave: number) => {
    const entry: WaveRequest = { wave };
    requests.push(entry);
    try {
      const response = await request(url, {
        dispatcher: agent,
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      await response.body.text();
      entry.status = response.statusCode;
      const connection = response.headers.connection;
      if (typeof connection === "string") entry.connection = connection;
    } catch (error) {
      entry.error = (error as Error & { code?: string }).code ?? (error as Error).message;
    }
  };
  const run = async () => {
    while (running) {
      currentWave++;
      await Promise.all(Array.from({ length: size }, () => one(currentWave)));
      completedWaves++;
      const failed = requests.some((entry) => entry.wave === currentWave && entry.error);
      // Once the listener is gone, do not spin.
      if (failed) await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const done = run();
  return {
    requests,
    get completedWaves() {
      return completedWaves;
    },
    get currentWave() {
      return currentWave;
    },
    async stop() {
      if (!running) return done;
      running = false;
      await done;
      await agent.close();
    },
  };
}
