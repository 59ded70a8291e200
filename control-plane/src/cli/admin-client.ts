import { ClawctlError } from "./clawctl-error.js";

export interface AdminClientOptions {
  /** Base URL of the admin API, for example http://127.0.0.1:9180. */
  server: string;
  /** Bearer token; default none. */
  token?: string;
  /** Default the global fetch. */
  fetch?: typeof fetch;
  /** Lines added under a 401 answer: where the token came from, or where none was found. */
  unauthorizedHint?: readonly string[];
}

export interface AdminClient {
  request<T>(method: string, path: string, body?: unknown): Promise<T>;
}

interface ApiErrorBody {
  error?: { code?: string; message?: string; details?: unknown };
}

/** A thin JSON client of the admin API; every non-2xx answer becomes a ClawctlError. */
export function createAdminClient(options: AdminClientOptions): AdminClient {
  const base = options.server.replace(/\/+$/, "");
  const doFetch = options.fetch ?? fetch;
  return {
    async request<T>(method: string, path: string, body?: unknown): Promise<T> {
      const headers: Record<string, string> = { accept: "application/json" };
      if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
      if (body !== undefined) headers["content-type"] = "application/json";
      let response: Response;
      try {
        response = await doFetch(`${base}${path}`, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      } catch (error) {
        const cause = (error as { cause?: { message?: string } }).cause?.message;
        const reason = cause ?? (error instanceof Error ? error.message : String(error));
        throw new ClawctlError(`cannot reach the admin API at ${base}: ${reason}`);
      }
      const text = await response.text();
      let json: unknown;
      try {
        json = text === "" ? undefined : JSON.parse(text);
      } catch {
        json = undefined;
      }
      if (!response.ok) {
        const error = apiError(response.status, json, text);
        if (response.status !== 401 || options.unauthorizedHint === undefined) throw error;
        throw new ClawctlError(error.message, error.exitCode, [
          ...error.lines,
          ...options.unauthorizedHint,
        ]);
      }
      return json as T;
    },
  };
}

function apiError(status: number, json: unknown, text: string): ClawctlError {
  const error = (json as ApiErrorBody | undefined)?.error;
  if (error?.message === undefined) {
    return new ClawctlError(`admin API answered HTTP ${status}: ${text.slice(0, 200)}`);
  }
  const code = error.code === undefined ? "" : ` (${error.code})`;
  return new ClawctlError(`${error.message}${code}`, 1, detailLines(error.details));
}

/** One line per field problem, when the details are the API's field list. */
function detailLines(details: unknown): string[] {
  if (!Array.isArray(details)) return [];
  const lines: string[] = [];
  for (const detail of details) {
    if (typeof detail !== "object" || detail === null) continue;
    const { kind, name, path, field, message } = detail as Record<string, unknown>;
    if (typeof message !== "string") continue;
    const owner = typeof kind === "string" && typeof name === "string" ? `${kind}/${name} ` : "";
    const where = typeof path === "string" ? path : typeof field === "string" ? field : "";
    lines.push(`  - ${owner}${where}${where ? ": " : ""}${message}`);
  }
  return lines;
}
