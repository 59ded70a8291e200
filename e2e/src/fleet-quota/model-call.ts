import type { IncomingMessage } from "node:http";
import {
  type PolicyRequest,
  type PolicyServices,
  TenantKeys,
  tokenBudget,
} from "@clawgate/data-plane";
import type { Tenant } from "@clawgate/proto";

/**
 * One model call as the data plane's token-budget policy sees it: admitted or refused before
 * the upstream, then the upstream's response streamed through the policy's observer chunk by
 * chunk, as the proxy relays it to the client. Resolves with the status the client gets.
 */
export async function modelCall(
  services: PolicyServices,
  tenant: Tenant,
  url: string,
): Promise<number> {
  const policy = tokenBudget.compile({
    route: undefined as never,
    tenants: new Map([[tenant.name, tenant]]),
  });
  if (policy === undefined) throw new Error("token-budget compiled to nothing");
  const request: PolicyRequest = {
    req: { headers: {} } as IncomingMessage,
    requestId: "e2e",
    tenantKeys: TenantKeys.NONE,
    headers: [],
    tenant: { name: tenant.name, source: tenant },
  };
  const answer = policy.onRequest(request, services);
  if (answer !== undefined) {
    policy.onComplete?.(request, 429, services);
    return 429;
  }
  const response = await fetch(url);
  const observer = policy.onResponse?.(
    request,
    response.status,
    { "content-type": response.headers.get("content-type") ?? undefined },
    services,
  );
  if (response.body !== null) {
    for await (const chunk of response.body) observer?.onData?.(Buffer.from(chunk));
  }
  observer?.onEnd?.();
  policy.onComplete?.(request, response.status, services);
  return response.status;
}
