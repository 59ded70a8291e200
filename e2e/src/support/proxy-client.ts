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
