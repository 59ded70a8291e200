import { isIP } from "node:net";
import { z } from "zod";
import { CONTROL_CHARACTER } from "./route-rules.js";

// Checked when config is validated only. A DNS name of labels, at most 253 characters; an IP
// literal is refused because RFC 6066 forbids one in SNI.
const DNS_NAME =
  /^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/;

/** Why a TLS server name cannot be sent as SNI, or undefined when it can. */
export function serverNameProblem(value: string): string | undefined {
  if (value.length > 253 || !DNS_NAME.test(value)) return "must be a DNS name";
  if (isIP(value) !== 0) return "must be a DNS name, not an IP address (SNI carries names only)";
  return undefined;
}

/**
 * Why a certificate, key or CA path cannot be used, or undefined. The files live on each data
 * plane's machine (the control plane ships paths, never key material), and a data plane's
 * working directory is nobody's business, so the path must be absolute.
 */
export function tlsFilePathProblem(value: string): string | undefined {
  if (value.length === 0 || value.length > 4096) return "must be 1..4096 characters";
  if (CONTROL_CHARACTER.test(value)) return "must hold no control characters";
  if (!value.startsWith("/")) return "must be an absolute path on the data plane's machine";
  return undefined;
}

const serverName = z.string().superRefine((value, ctx) => {
  const problem = serverNameProblem(value);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
});

const tlsFile = z.string().superRefine((value, ctx) => {
  const problem = tlsFilePathProblem(value);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
});

/**
 * TLS from a data plane to an upstream's nodes. Absent: plaintext HTTP. Present: HTTPS with
 * the certificate checked against `caFile` (else the system's roots) and the name dialled.
 */
export const upstreamTlsSchema = z
  .strictObject({
    /** Dial the nodes over TLS; default true once a `tls` block is written. */
    enabled: z.boolean().default(true),
    /** SNI and the name the certificate must carry; default the node's host when it is a name. */
    serverName: serverName.optional(),
    /** PEM CA bundle trusted for the nodes' certificates; default the system's roots. */
    caFile: tlsFile.optional(),
    /** PEM client certificate for mutual TLS; set with clientKeyFile. */
    clientCertFile: tlsFile.optional(),
    /** PEM private key of clientCertFile. */
    clientKeyFile: tlsFile.optional(),
    /** Check the node's certificate chain and name; default true. false is for labs only. */
    verify: z.boolean().default(true),
  })
  .superRefine((tls, ctx) => {
    for (const problem of clientPairProblems(tls.clientCertFile, tls.clientKeyFile)) {
      ctx.addIssue({ code: "custom", path: [problem.field], message: problem.message });
    }
  });

export type UpstreamTlsDocument = z.infer<typeof upstreamTlsSchema>;

/** A client certificate without its key (or the reverse) can never complete a handshake. */
export function clientPairProblems(
  certFile: string | undefined,
  keyFile: string | undefined,
): { field: string; message: string }[] {
  const hasCert = certFile !== undefined && certFile !== "";
  const hasKey = keyFile !== undefined && keyFile !== "";
  if (hasCert && !hasKey)
    return [{ field: "clientKeyFile", message: "is required with clientCertFile" }];
  if (hasKey && !hasCert)
    return [{ field: "clientCertFile", message: "is required with clientKeyFile" }];
  return [];
}
