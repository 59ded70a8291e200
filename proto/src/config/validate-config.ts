import type { Route, Snapshot, Upstream } from "../gen/clawgate/v1/config_pb.js";
import { MAX_KEEP_ALIVE_TIMEOUT_MS, MAX_NODE_WEIGHT } from "./defaults.js";
import { parseNodeAddress } from "./node-address.js";
import { requestPathProblem } from "./origin-form.js";
import { type ConfigProblem, problemsFromIssues, type ResourceKind } from "./problems.js";
import { referenceProblems } from "./references.js";
import { RESOURCE_NAME, RESOURCE_NAME_RULE } from "./resource-name.js";
import { type ResourceDocuments, resourceSchemas } from "./resource-schemas.js";
import { RETRY_AFTER_SCOPES } from "./route-policy-rules.js";
import { routePolicyProblems } from "./route-policy-wire.js";
import {
  CONTROL_CHARACTER,
  isHeaderName,
  isHostHeader,
  isRouteHost,
  isRoutePath,
  METHOD,
  ROUTE_PATH_RULE,
} from "./route-rules.js";
import { upstreamTlsProblems } from "./upstream-tls-wire.js";

/** The largest split weight the data plane's weighted round robin takes. */
export const MAX_SPLIT_WEIGHT = 1_000_000;

export type ValidatedResource<K extends ResourceKind> =
  | { ok: true; document: ResourceDocuments[K] }
  | { ok: false; problems: ConfigProblem[] };

/**
 * Checks one document as a platform team wrote it and fills every default: what the control
 * plane stores, and later publishes, is the returned document.
 */
export function validateResource<K extends ResourceKind>(
  kind: K,
  name: string,
  document: unknown,
): ValidatedResource<K> {
  if (!RESOURCE_NAME.test(name)) {
    return {
      ok: false,
      problems: [{ kind, name, field: "", message: `name ${RESOURCE_NAME_RULE}` }],
    };
  }
  const result = resourceSchemas[kind].safeParse(document);
  if (!result.success)
    return { ok: false, problems: problemsFromIssues(kind, name, result.error.issues) };
  return { ok: true, document: result.data as ResourceDocuments[K] };
}

/**
 * Checks a snapshot as it travels on the wire, with the rules the documents were checked by:
 * what a data plane would refuse. The control plane runs it before publishing (nothing it
 * publishes can be NACKed for its content) and the data plane before compiling, where the
 * problems become the NACK's text. Wire fields an older control plane may leave out are not
 * refused here; the compiler takes their defaults from the shared defaults module.
 */
export function validateSnapshot(snapshot: Snapshot): ConfigProblem[] {
  const steps = validateSnapshotSteps(snapshot);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** Resources checked between two points where validateSnapshotSteps lets its caller pause. */
export const VALIDATE_STEP_RESOURCES = 200;

/**
 * validateSnapshot cut into steps of `every` resources: each `yield` is a point where a data
 * plane may hand its event loop back. At 12,000 resources the whole check was one turn of
 * 30 ms alone, and of several hundred with ten data planes booting on two cores. Returns the
 * same problems, in the same order.
 */
export function* validateSnapshotSteps(
  snapshot: Snapshot,
  every = VALIDATE_STEP_RESOURCES,
): Generator<void, ConfigProblem[]> {
  const problems: ConfigProblem[] = [];
  if (!Number.isSafeInteger(Number(snapshot.version))) {
    problems.push({ kind: "snapshot", name: "", field: "version", message: "is beyond 2^53" });
  }
  if (!Number.isSafeInteger(Number(snapshot.createdAtMs))) {
    problems.push({ kind: "snapshot", name: "", field: "createdAtMs", message: "is beyond 2^53" });
  }
  const breakerNames = yield* uniqueNamesSteps("breakers", snapshot.breakers, problems, every);
  const upstreamNames = yield* uniqueNamesSteps("upstreams", snapshot.upstreams, problems, every);
  yield* uniqueNamesSteps("routes", snapshot.routes, problems, every);
  // An upstream weighs as much as its nodes: each node's address is parsed.
  let weight = 0;
  for (const upstream of snapshot.upstreams) {
    problems.push(...upstreamProblems(upstream));
    weight += 1 + upstream.nodes.length;
    if (weight >= every) {
      weight = 0;
      yield;
    }
  }
  for (const [i, route] of snapshot.routes.entries()) {
    problems.push(...routeProblems(route));
    if ((i + 1) % every === 0) yield;
  }
  // References in slices too: routes first, then upstreams, the order referenceProblems uses.
  const names = { upstreamNames, breakerNames };
  for (let i = 0; i < snapshot.routes.length; i += every) {
    const routes = snapshot.routes.slice(i, i + every);
    problems.push(...referenceProblems({ routes, upstreams: [], ...names }));
    yield;
  }
  for (let i = 0; i < snapshot.upstreams.length; i += every) {
    const upstreams = snapshot.upstreams.slice(i, i + every);
    problems.push(...referenceProblems({ routes: [], upstreams, ...names }));
    yield;
  }
  return problems;
}

/** Names of one kind: each present, well formed and used once. */
export function uniqueNames(
  kind: ResourceKind,
  resources: readonly { name: string }[],
  problems: ConfigProblem[],
): Set<string> {
  const steps = uniqueNamesSteps(kind, resources, problems, Number.POSITIVE_INFINITY);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** uniqueNames with a `yield` after every `every` names. */
function* uniqueNamesSteps(
  kind: ResourceKind,
  resources: readonly { name: string }[],
  problems: ConfigProblem[],
  every: number,
): Generator<void, Set<string>> {
  const names = new Set<string>();
  for (const [index, { name }] of resources.entries()) {
    if (name === "") {
      problems.push({ kind, name, field: "name", message: `is empty (${kind}[${index}])` });
    } else if (!RESOURCE_NAME.test(name)) {
      problems.push({ kind, name, field: "name", message: RESOURCE_NAME_RULE });
    } else if (names.has(name)) {
      problems.push({ kind, name, field: "name", message: "is repeated" });
    }
    names.add(name);
    if ((index + 1) % every === 0) yield;
  }
  return names;
}

/**
 * What a data plane would refuse in one upstream by itself (references aside): the control
 * plane checks each changed upstream with it instead of validating the whole snapshot again.
 */
export function upstreamProblems(upstream: Upstream): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const add = (field: string, message: string) =>
    problems.push({ kind: "upstreams", name: upstream.name, field, message });
  // The prober writes this path into a request line; one it cannot send would fail every probe
  // and evict every healthy node, so the snapshot is refused instead.
  const healthPath = upstream.healthCheck?.path ?? "";
  const pathProblem =
    healthPath === "" ? undefined : requestPathProblem(healthPath, { query: true });
  if (pathProblem !== undefined) add("healthCheck.path", pathProblem);
  if (CONTROL_CHARACTER.test(upstream.healthCheck?.expectStatus ?? "")) {
    add("healthCheck.expectStatus", "holds a control character");
  }
  const seen = new Set<string>();
  upstream.nodes.forEach((node, i) => {
    const parsed = parseNodeAddress(node.address);
    if (!parsed.ok) add(`nodes.${i}.address`, parsed.reason);
    else if (seen.has(node.address)) add(`nodes.${i}.address`, `repeats "${node.address}"`);
    seen.add(node.address);
    if (!inRange(node.weight, 1, MAX_NODE_WEIGHT)) {
      add(`nodes.${i}.weight`, `must be 1..${MAX_NODE_WEIGHT}, got ${node.weight}`);
    }
  });
  const keepAlive = upstream.keepAliveTimeoutMs;
  if (keepAlive !== undefined && !inRange(keepAlive, 1, MAX_KEEP_ALIVE_TIMEOUT_MS)) {
    add("keepAliveTimeoutMs", `must be 1..${MAX_KEEP_ALIVE_TIMEOUT_MS}, got ${keepAlive}`);
  }
  for (const problem of upstreamTlsProblems(upstream.tls)) add(problem.field, problem.message);
  // "" is a control plane older than the field: the data plane reads it as "node".
  const scope = upstream.retryAfterScope;
  if (scope !== "" && !(RETRY_AFTER_SCOPES as readonly string[]).includes(scope)) {
    add("retryAfterScope", `must be "node", "upstream" or "tenant", got "${scope}"`);
  }
  return problems;
}

/** What a data plane would refuse in one route by itself (references aside). */
export function routeProblems(route: Route): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const add = (field: string, message: string) =>
    problems.push({ kind: "routes", name: route.name, field, message });
  const match = route.match;
  if (match === undefined) {
    add("match", "is missing");
  } else if (match.path !== "" && match.pathPrefix !== "") {
    add("match", "sets both path and pathPrefix; set one");
  } else if (match.path === "" && match.pathPrefix === "") {
    add("match", "sets neither path nor pathPrefix; set one");
  } else {
    const field = match.path !== "" ? "match.path" : "match.pathPrefix";
    if (!isRoutePath(match.path || match.pathPrefix)) add(field, ROUTE_PATH_RULE);
  }
  match?.hosts.forEach((host, i) => {
    if (!isRouteHost(host))
      add(`match.hosts.${i}`, "must be a host name (or *.suffix) without port");
  });
  match?.methods.forEach((method, i) => {
    if (!METHOD.test(method)) add(`match.methods.${i}`, "must be upper case");
  });
  match?.headers.forEach((header, i) => {
    if (!isHeaderName(header.name)) add(`match.headers.${i}.name`, "is not a header name");
  });

  if (route.upstream !== "" && route.split.length > 0) {
    add("", "sets both upstream and split; set one");
  } else if (route.upstream === "" && route.split.length === 0) {
    add("", "sets neither upstream nor split; set one");
  }
  const inSplit = new Set<string>();
  route.split.forEach((part, i) => {
    if (inSplit.has(part.upstream)) add(`split.${i}.upstream`, `repeats "${part.upstream}"`);
    inSplit.add(part.upstream);
    if (!inRange(part.weight, 1, MAX_SPLIT_WEIGHT)) {
      add(`split.${i}.weight`, `must be 1..${MAX_SPLIT_WEIGHT}, got ${part.weight}`);
    }
  });

  // The rewritten prefix goes into the upstream request line as written, so it must be an
  // absolute path (no query) that needs no escaping, and one normalization leaves alone.
  const rewritePrefix = route.rewrite?.pathPrefix ?? "";
  if (rewritePrefix !== "") {
    const problem = requestPathProblem(rewritePrefix);
    if (problem !== undefined) add("rewrite.pathPrefix", problem);
    else if (!isRoutePath(rewritePrefix)) add("rewrite.pathPrefix", ROUTE_PATH_RULE);
  }
  const rewriteHost = route.rewrite?.host ?? "";
  if (rewriteHost !== "" && !isHostHeader(rewriteHost)) {
    add("rewrite.host", "is not a host[:port]");
  }
  for (const problem of routePolicyProblems(route)) add(problem.field, problem.message);
  return problems;
}

function inRange(value: number, min: number, max: number): boolean {
  return Number.isInteger(value) && value >= min && value <= max;
}
