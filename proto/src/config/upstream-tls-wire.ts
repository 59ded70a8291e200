import type { UpstreamTls } from "../gen/clawgate/v1/config_pb.js";
import { clientPairProblems, serverNameProblem, tlsFilePathProblem } from "./upstream-tls.js";

/**
 * The rules of `upstreamTlsSchema`, applied to the wire message, with fields named as in the
 * document (`tls.caFile`). Whether the files can be read is the data plane's check: they live
 * on its machine.
 */
export function upstreamTlsProblems(
  tls: UpstreamTls | undefined,
): { field: string; message: string }[] {
  if (tls === undefined) return [];
  const problems: { field: string; message: string }[] = [];
  if (tls.serverName !== "") {
    const problem = serverNameProblem(tls.serverName);
    if (problem !== undefined) problems.push({ field: "tls.serverName", message: problem });
  }
  const files = {
    caFile: tls.caFile,
    clientCertFile: tls.clientCertFile,
    clientKeyFile: tls.clientKeyFile,
  };
  for (const [field, path] of Object.entries(files)) {
    if (path === "") continue;
    const problem = tlsFilePathProblem(path);
    if (problem !== undefined) problems.push({ field: `tls.${field}`, message: problem });
  }
  for (const problem of clientPairProblems(tls.clientCertFile, tls.clientKeyFile)) {
    problems.push({ field: `tls.${problem.field}`, message: problem.message });
  }
  return problems;
}
