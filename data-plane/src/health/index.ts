// The health module's public API: what the runtime and the balancer wire in.
export { HealthLog, type HealthLogOptions } from "./health-log.js";
export { HealthMetrics, type HealthSink } from "./health-metrics.js";
export {
  type HealthChangeListener,
  HealthRegistry,
  type HealthRegistryOptions,
} from "./health-registry.js";
export { HealthReportPacer, type HealthReportPacerOptions } from "./health-report-pacer.js";
export {
  DEFAULT_HEALTH_CHECK,
  type HealthCheckSettings,
  type HealthSource,
  type HealthTarget,
  healthCheckSettings,
  healthTargets,
} from "./health-targets.js";
export type {
  HealthChange,
  HealthChangeReason,
  HealthState,
  HealthThresholds,
} from "./node-health.js";
export { formatEvidence, type ProbeEvidence } from "./prober/probe-protocol.js";
export type { Prober, ProberFactory } from "./prober/probe-worker-client.js";
export { type Schedule, systemSchedule } from "./schedule.js";
