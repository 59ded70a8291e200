import type { ResourceKind } from "@clawgate/proto";
import { MAX_PAGE_LIMIT } from "../resources/list-page.js";
import type { AdminClient } from "./admin-client.js";
import type { ResourceView } from "./command-context.js";

interface ListPage {
  items: ResourceView[];
  revision: number;
  /** Present while more pages follow. */
  continue?: string;
}

/**
 * Every resource of a kind: GET /v1/{kind} answers one page at a time, so follow its continue
 * token to the last page, asking for the largest pages to make the fewest requests.
 */
export async function listAll(
  api: AdminClient,
  kind: ResourceKind,
): Promise<{ items: ResourceView[]; revision: number }> {
  const items: ResourceView[] = [];
  let next: string | undefined;
  for (;;) {
    const query = `?limit=${MAX_PAGE_LIMIT}${next === undefined ? "" : `&continue=${encodeURIComponent(next)}`}`;
    const page = await api.request<ListPage>("GET", `/v1/${kind}${query}`);
    items.push(...page.items);
    next = page.continue;
    if (next === undefined) return { items, revision: page.revision };
  }
}
