import type { IncomingMessage, ServerResponse } from "node:http";
import type { CompiledNode, CompiledRoute, CompiledTarget } from "../../compiler/compiled-types.js";
import type { AttemptFailureKind } from "../../errors/failure-kind.js";
import type { PolicyRequest, PolicyTenant } from "../../policy/policy.js";
import { TenantKeys } from "../../policy/tenant-keys.js";
import type { ReplayableBody } from "../../retry/replayable-body.js";
import type { UpstreamHealing } from "../request-healing.js";
import { bodyBytesIn } from "./body-bytes-in.js";
import type { StageHandler } from "./stage.js";

/**
 * Exchange.bufferBodyBytes of a body with no declared length (chunked, or HTTP/2 without
 * content-length): the request-body stage reads it whole only if it ends within
 * STREAM_USAGE_BODY_LIMIT, else passes it on as a stream.
 */
export const UNKNOWN_BODY_LENGTH = Number.POSITIVE_INFINITY;

/**
 * What the request carries upstream: none, the client's stream (sent once), a chunked body kept
 * for replay, or the whole body in memory (read by the request-body stage; every attempt sends
 * the same bytes), or a chunked body passed through under the route's maxBodyBytes.
 */
export type ExchangeBody =
  | null
  | IncomingMessage
  | ReplayableBody
  | Buffer
  | AsyncGenerator<Uint8Array>;

/**
 * One proxied request's state, shared by the stages of the pipeline: what the handler resolved
 * (route, target, the upstream's healing record, the forwarded path and headers), and the few
 * facts stages hand each other (the node of the attempt, whether the response started).
 * Attempts never overlap, so each field describes the current attempt.
 */
export class Exchange implements PolicyRequest {
  /** The node of the current attempt, set by the node-pick stage. */
  node: CompiledNode | undefined = undefined;
  /** Preset by the retry stage: the node the next attempt goes to. */
  nextNode: CompiledNode | undefined = undefined;
  /** Nodes tried so far, once a retry is planned. */
  tried: CompiledNode[] | undefined = undefined;
  /** Attempts sent to a node's pool so far. */
  attempt = 0;
  /** The failure a retry was last planned for: the request's outcome if it ends before. */
  retriedAfter: AttemptFailureKind | undefined = undefined;
  /** The current attempt's response carried a Retry-After cooldown (429 or 503). */
  coolingDown = false;
  /** The status line went to the client; from here a failure can only cut the connection. */
  responseStarted = false;
  /** Client-facing headers as sent (kept for the stale cache when the route caches). */
  sentHeaders: string[] | undefined = undefined;
  /** The status the client got or is getting; 0 until then. */
  status = 0;
  /** The client's answer is complete (or abandoned). */
  settled = false;
  clientGone = false;
  /**
   * The body's length as the client sent it (the access log's bytesIn), once the gateway added
   * include_usage to it (route usage.injectStreamUsage: to a body read whole, or at the end of a
   * large one as it streamed, then the bytes read so far); -1 while it goes as the client sent it.
   */
  clientBodyBytes = -1;
  /**
   * The gateway asked for usage the client did not ask for: the stream's usage chunk is kept from
   * the client. Set with clientBodyBytes, but not always: a client whose stream_options could
   * not be read, or whose include_usage is truthy but not `true`, gets its body rewritten and
   * keeps the chunk it may have asked for.
   */
  stripStreamUsage = false;
  /** The tenant the route's auth policy identified; undefined without auth or key. */
  tenant: PolicyTenant | undefined = undefined;
  /** The outermost handler: where a failure of the proxy itself enters the pipeline. */
  top: StageHandler | undefined = undefined;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly route: CompiledRoute,
    readonly target: CompiledTarget,
    /** The upstream's breaker, budget, cooldown and picker, looked up once. */
    readonly healing: UpstreamHealing,
    readonly method: string,
    /** Path and query as sent upstream. */
    readonly path: string,
    /** Request headers for undici, flat. */
    readonly headers: string[],
    public body: ExchangeBody,
    /** Stale-cache key; undefined unless the route opted in and this is a GET. */
    readonly staleKey: string | undefined,
    readonly requestId: string,
    readonly startedAt: number,
    /**
     * Bytes of a body to read whole before the first attempt (request-body stage); -1: none;
     * UNKNOWN_BODY_LENGTH: a body without a declared length, read whole if it ends in time.
     */
    readonly bufferBodyBytes = -1,
    /** The tenants' keys of the snapshot the request was routed by (none: no tenant). */
    readonly tenantKeys: TenantKeys = TenantKeys.NONE,
  ) {}

  get bodyBytesIn(): number | undefined {
    return bodyBytesIn(this);
  }

  /**
   * A bug in one of this exchange's callbacks (a timer, a client event, undici's error
   * callback): the request ends with 500 or a cut connection, the process serves on.
   */
  failInternally(error: unknown): void {
    try {
      this.top?.onFailure({
        kind: "internal",
        error: error instanceof Error ? error : new Error(String(error)),
      });
    } catch {
      // The bookkeeping is what failed: at least the client is not left hanging.
      this.settled = true;
      this.res.destroy();
    }
  }
}
