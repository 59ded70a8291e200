export { Backoff, type BackoffOptions } from "@clawgate/runtime";
export { type AdminOptions, createAdminHandler, createAdminServer } from "./admin/admin-server.js";
export { CircuitBreaker } from "./breaker/circuit-breaker.js";
export { FleetProbes } from "./breaker/fleet-probes.js";
export { FakeClock } from "./clock/clock.js";
export { compileSnapshot } from "./compiler/compile-snapshot.js";
export * from "./config/index.js";
export { main, type RunningDataPlane, startDataPlane } from "./main.js";
export { ProxyMetrics } from "./metrics/proxy-metrics.js";
export { SnapshotMetrics } from "./metrics/snapshot-metrics.js";
export { TenantMetrics } from "./metrics/tenant-metrics.js";
export type { PolicyRequest, PolicyServices } from "./policy/policy.js";
export { rateLimit } from "./policy/rate-limit.js";
export { TenantKeys } from "./policy/tenant-keys.js";
export { tokenBudget } from "./policy/token-budget.js";
export { createProxyHandler } from "./proxy/proxy-handler.js";
export { type Admission, type ConsumptionReport, LeaseBook } from "./quota/lease-book.js";
export {
  AppliedSnapshot,
  type AppliedSnapshotOptions,
  type AppliedState,
  type CompiledSnapshot,
  type CompileResult,
} from "./runtime/applied-snapshot.js";
export { ListenError, listen } from "./runtime/listen.js";
export type {
  ConnectionState,
  ConnectionStateListener,
} from "./snapshot-client/connection-state.js";
export {
  type ApplyResult,
  SnapshotClient,
  type SnapshotClientOptions,
} from "./snapshot-client/snapshot-client.js";
export { PoolRegistry } from "./upstream/pool-registry.js";
