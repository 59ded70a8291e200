/** An admin API answer that is not 2xx, with the API's own message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** What to tell the user about a failed call: a refused token is said plainly. */
export function explain(error) {
  if (error instanceof ApiError) {
    if (error.status === 401) {
      return `The control plane refused this token (${error.message}). Enter a valid admin API token.`;
    }
    if (error.status === 403) return `This token may not read this: ${error.message}`;
    return `${error.message} (HTTP ${error.status})`;
  }
  return `The control plane did not answer: ${error instanceof Error ? error.message : error}`;
}

async function failure(response) {
  let code = "";
  let message = response.statusText || `HTTP ${response.status}`;
  try {
    const body = await response.json();
    code = body?.error?.code ?? "";
    message = body?.error?.message ?? message;
  } catch {}
  return new ApiError(response.status, code, message);
}

/** GET `path` from the admin API with the token; resolves with the JSON body. */
export async function getJson(token, path, signal) {
  const response = await fetch(path, {
    headers: { authorization: `Bearer ${token}`, accept: "application/json" },
    cache: "no-store",
    signal,
  });
  if (!response.ok) throw await failure(response);
  return response.json();
}

/** The largest page GET /v1/{kind} answers (MAX_PAGE_LIMIT in resources/list-page.ts). */
const LIST_PAGE_LIMIT = 500;

/**
 * Every item of a list (GET /v1/{kind}): the API answers one page at a time and says, with
 * `continue`, that more follow; each request stays small however long the list is.
 */
export async function getAllPages(token, path, signal) {
  const items = [];
  let next;
  do {
    const query = next === undefined ? "" : `&continue=${encodeURIComponent(next)}`;
    const page = await getJson(token, `${path}?limit=${LIST_PAGE_LIMIT}${query}`, signal);
    items.push(...page.items);
    next = page.continue;
  } while (next !== undefined);
  return items;
}

/** Opens GET `path` as a stream with the token (never in the URL); rejects on a non-2xx answer. */
export async function openStream(token, path, signal) {
  const response = await fetch(path, {
    headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
    cache: "no-store",
    signal,
  });
  if (!response.ok) throw await failure(response);
  return response.body;
}
