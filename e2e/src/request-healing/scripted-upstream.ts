import { createServer, type IncomingMessage, type ServerResponse } from "node:http";

/** How a scripted upstream answers one request (its body already read). */
export type Script = (req: IncomingMessage, res: ServerResponse) => void;

export interface ScriptedUpstream {
  address: string;
  /** performance.timeOrigin-based ms of every request served, /healthz excluded. */
  readonly hits: number[];
  /** Replaces how requests are answered from now on. */
  script: Script;
  close(): Promise<void>;
}

/**
 * An in-process upstream whose answers a test changes as it goes (500s, then 200s; a 429) and
 * that records when each request arrived. /healthz always answers {"status":"ok"}, so probes
 * never take its node out and only the request layer reacts to what it does.
 */
export async function startScriptedUpstream(script: Script): Promise<ScriptedUpstream> {
  const hits: number[] = [];
  const state = { script };
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url === "/healthz") {
        res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
        return;
      }
      hits.push(Date.now());
      state.script(req, res);
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
    hits,
    get script() {
      return state.script;
    },
    set script(next: Script) {
      state.script = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export const answer =
  (status: number, body = "", headers: Record<string, string> = {}): Script =>
  (_req, res) => {
    res.writeHead(status, { "content-type": "text/plain", ...headers }).end(body);
  };
