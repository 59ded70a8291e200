import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { serializerCompiler, type ZodTypeProvider } from "fastify-type-provider-zod";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { TokenStore } from "../auth/token-store.js";
import type { AdminTls } from "../config/admin-tls.js";
import type { LiveFeed } from "../console/live-feed.js";
import { liveRoutes } from "../console/live-routes.js";
import { type UiRoutesOptions, uiRoutes } from "../console/ui-routes.js";
import type { FleetSource } from "../fleet/data-plane-view.js";
import type { FleetHealth } from "../health/fleet-health.js";
import type { ConfigHistory } from "../history/config-history.js";
import type { ConfigAudit } from "../journal/config-audit.js";
import type { Journal } from "../journal/journal.js";
import type { NodeRegistry } from "../registry/node-registry.js";
import type { RemediationAllowlist } from "../remediation/remediation-allowlist.js";
import type { RemediationRunner } from "../remediation/remediation-runner.js";
import type { FleetBreakers } from "../replicas/fleet-breakers.js";
import type { ConfigService } from "../resources/config-service.js";
import type { RolloutController } from "../rollout/rollout-controller.js";
import type { SnapshotStatusSource } from "../snapshot/snapshot-status.js";
import { applyRoute } from "./apply-route.js";
import { bearerAuth, bootstrapOnly } from "./auth.js";
import { configJournal } from "./config-journal.js";
import { installErrorHandling, validatorCompiler } from "./errors.js";
import { eventsRoutes } from "./events-routes.js";
import { healthRoutes } from "./health-routes.js";
import { historyRoutes } from "./history-routes.js";
import { registerOpenApi } from "./openapi.js";
import { registryRoutes } from "./registry-routes.js";
import { adminRequestLogger } from "./request-log.js";
import { resourceRoutes } from "./resource-routes.js";
import { rolloutWriteGuard } from "./rollout-guard.js";
import { rolloutRoutes } from "./rollout-routes.js";
import { statusRoutes } from "./status-routes.js";
import { TokenBoundResponses } from "./token-bound-responses.js";
import { tokenRoutes } from "./token-routes.js";

export interface AdminAppOptions {
  config: ConfigService;
  snapshot: SnapshotStatusSource;
  fleet: FleetSource;
  /** Bearer token every route but /healthz, /readyz and /docs requires; default none (open, for tests). */
  token?: string;
  /**
   * Named tokens with roles, the bootstrap token among them (as admin); serves /v1/tokens.
   * Replaces `token` for authentication when given.
   */
  tokens?: TokenStore;
  /** Journals each config write with its token's name, served at /v1/events?type=config. */
  audit?: ConfigAudit;
  /** Keeps each config version; serves /v1/history and /v1/rollback. Default none. */
  history?: ConfigHistory;
  /** Registry served at /metrics; default none (no /metrics route). */
  metrics?: Registry;
  /** Request and error log; default false (silent). */
  logger?: Logger | false;
  /** Serves /v1/upstreams/{name}/nodes (register, renew, deregister, list); default none. */
  registry?: NodeRegistry;
  /** Serves GET /v1/events from the heal journal; default none. */
  journal?: Journal;
  /** Serves GET /v1/upstreams/{name}/health from the data planes' reports; default none. */
  health?: Pick<FleetHealth, "upstream">;
  /** Adds each node's remediation episode to the health view; default none. */
  remediation?: Pick<RemediationRunner, "status">;
  /** Adds the data planes' breakers that are not closed to the health view; default none. */
  breakers?: Pick<FleetBreakers, "upstream">;
  /** Certificate and key to serve HTTPS with; default none (plain HTTP). */
  tls?: AdminTls;
  /** Runs progressive rollouts; serves /v1/rollout and takes `rollout` on apply. Default none. */
  rollouts?: RolloutController;
  /** Serves GET /v1/live, the console's server-sent events; default none. */
  live?: LiveFeed;
  /** Where the console page (/ui) is read from; default the build output. */
  ui?: UiRoutesOptions;
  /** True while the process stops, so /readyz answers 503; default never. */
  draining?: () => boolean;
  /**
   * What a config write may put in an upstream's remediation (the control plane's
   * remediationCommands and remediationWebhookOrigins); default nothing: such writes refused.
   */
  remediationAllowlist?: RemediationAllowlist;
}

/** Largest request body accepted; a full config apply of thousands of resources fits. */
const BODY_LIMIT_BYTES = 8 * 1024 * 1024;

/**
 * Assembles the admin API: auth, then validation, then the routes. Never listens, so tests
 * call `app.inject()` and the binary decides where to bind.
 */
export async function buildAdminApp(options: AdminAppOptions): Promise<FastifyInstance> {
  const https = options.tls === undefined ? {} : { https: options.tls };
  const base = (
    options.logger === undefined || options.logger === false
      ? Fastify({ logger: false, bodyLimit: BODY_LIMIT_BYTES, ...https })
      : Fastify({
          loggerInstance: adminRequestLogger(options.logger) as FastifyBaseLogger,
          bodyLimit: BODY_LIMIT_BYTES,
          ...https,
        })
  ) as FastifyInstance;
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installErrorHandling(app);
  // An empty JSON body reads as no body, so a DELETE sent with a JSON content type still works;
  // a PUT without a body then fails schema validation like any other missing document.
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    if (body === "") return done(null, undefined);
    parseJson(request, String(body), done);
  });
  const authenticator =
    options.tokens ?? (options.token === undefined ? undefined : bootstrapOnly(options.token));
  if (authenticator !== undefined) app.addHook("onRequest", bearerAuth(authenticator));
  const tokens = options.tokens;
  if (tokens !== undefined) {
    // After bearerAuth, so each response is known by its token: revoking it ends its streams.
    const bound = new TokenBoundResponses();
    app.addHook("onRequest", bound.track);
    const unsubscribe = tokens.onForget((name) => bound.closeToken(name));
    app.addHook("onClose", (_instance, done) => {
      unsubscribe();
      done();
    });
  }

  await registerOpenApi(app as unknown as FastifyInstance, {
    secured: authenticator !== undefined,
  });

  const { audit, history, rollouts } = options;
  const journal = configJournal(audit, history);
  if (rollouts !== undefined) {
    app.addHook("preHandler", rolloutWriteGuard(rollouts));
    await app.register(rolloutRoutes, { rollouts });
  }
  const { remediationAllowlist } = options;
  await app.register(resourceRoutes, {
    config: options.config,
    audit: journal,
    remediationAllowlist,
  });
  await app.register(applyRoute, {
    config: options.config,
    audit: journal,
    rollouts,
    remediationAllowlist,
  });
  if (history !== undefined) {
    await app.register(historyRoutes, {
      config: options.config,
      history,
      audit,
      remediationAllowlist,
    });
  }
  if (options.tokens !== undefined) {
    await app.register(tokenRoutes, { tokens: options.tokens, audit });
  }
  if (options.registry !== undefined) {
    await app.register(registryRoutes, { registry: options.registry, audit });
  }
  if (options.journal !== undefined) {
    await app.register(eventsRoutes, { journal: options.journal, audit });
  }
  if (options.health !== undefined) {
    await app.register(healthRoutes, {
      health: options.health,
      config: options.config,
      remediation: options.remediation,
      breakers: options.breakers,
    });
  }
  if (options.live !== undefined) await app.register(liveRoutes, { feed: options.live });
  await app.register(uiRoutes, options.ui ?? {});
  await app.register(statusRoutes, {
    snapshot: options.snapshot,
    fleet: options.fleet,
    metrics: options.metrics,
    draining: options.draining,
  });
  return app as unknown as FastifyInstance;
}
