import { request } from "node:http";

export interface ProxyResponse {
  status: number;
  text: string;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  json: unknown;
}

/** One request through a data plane (or anything else); transport failures throw. */
export async function send(url: string, init: RequestInit = {}): Promise<ProxyResponse> {
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000), ...init });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, text, json };
}

/** Name of the named upstream that answered; throws when the answer is not a 200 from one. */
export async function whoAnswered(url: string): Promise<string> {
  const response = await send(url);
  const name = (response.json as { upstream?: unknown } | undefined)?.upstream;
  if (response.status !== 200 || typeof name !== "string") {
    throw new Error(`GET ${url} answered ${response.status}: ${response.text.slice(0, 300)}`);
  }
  return name;
}

/** How often each upstream answered `count` sequential GETs of `url`. */
export async function tally(url: string, count: number): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (let i = 0; i < count; i++) {
    const name = await whoAnswered(url);
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

/**
 * A GET whose request target goes out byte for byte as given: fetch and URL resolve "..",
 * "%2e%2e" and "//" before sending, which is what a test of the gateway's own handling of
 * them must avoid (curl --path-as-is does the same). Transport failures throw.
 */
export function sendRawPath(baseUrl: string, rawPath: string): Promise<ProxyResponse> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: hostname, port, path: rawPath, method: "GET", agent: false, timeout: 10_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", reject);
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, text, json });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error(`GET ${rawPath}: no answer in 10 s`)));
    req.on("error", reject);
    req.end();
  });
}

/** The `error.code` of an error body the gateway answered with (its error catalog's code). */
export function errorCodeOf(text: string): string {
  return (JSON.parse(text) as { error: { code: string } }).error.code;
}
