import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";

/**
 * A fetch for the admin client that trusts `ca` (PEM) for https URLs, for an admin API whose
 * certificate a private CA signed. The global fetch takes no CA of its own, and
 * NODE_EXTRA_CA_CERTS is read only when the process starts, so clawctl --ca-file needs this.
 * It does what the admin client asks of fetch: a method, headers, a string body, the answer.
 */
export function fetchTrusting(ca: string | Buffer): typeof fetch {
  return ((input: string | URL, init: RequestInit = {}) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(String(input));
      const send = url.protocol === "https:" ? httpsRequest : httpRequest;
      const request = send(
        url,
        {
          method: init.method ?? "GET",
          headers: init.headers as Record<string, string> | undefined,
          ...(url.protocol === "https:" ? { ca } : {}),
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on("data", (chunk: Buffer) => chunks.push(chunk));
          response.on("error", reject);
          response.on("end", () => {
            const headers = new Headers();
            for (const [name, value] of Object.entries(response.headers)) {
              if (value !== undefined) headers.set(name, String(value));
            }
            const status = response.statusCode ?? 502;
            const body = status === 204 || status === 304 ? null : Buffer.concat(chunks);
            resolve(new Response(body, { status, headers }));
          });
        },
      );
      // Same shape as fetch's failures: the reason is the cause's message.
      request.on("error", (error) => reject(new TypeError("fetch failed", { cause: error })));
      if (typeof init.body === "string") request.write(init.body);
      request.end();
    })) as typeof fetch;
}
