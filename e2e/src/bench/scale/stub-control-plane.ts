import {
  create,
  type EncodedOrResponse,
  encodeResponse,
  HEALTH_CHANGES_HEADER,
  type Route,
  RouteSchema,
  type Snapshot,
  SnapshotSchema,
  type StreamSnapshotsRequest,
  StreamSnapshotsResponseSchema,
  snapshotServiceDefinition,
  type Upstream,
  UpstreamSchema,
} from "@clawgate/proto";
import * as grpc from "@grpc/grpc-js";
import { nodeAddress, routeShape, type ScaleSize, upstreamName } from "./scale-config.js";

/** First byte of a StreamSnapshotsRequest holding a health report: field 4, length-delimited. */
const HEALTH_TAG = (4 << 3) | 2;

/**
 * The scale config as one snapshot, the way a control plane fills it: every node refuses
 * (see `nodeAddress`), probed by TCP only once an hour (the longest interval allowed), and
 * `unhealthyThreshold` as given.
 */
export function scaleSnapshot(size: ScaleSize, unhealthyThreshold: number): Snapshot {
  const per = Math.max(1, Math.floor(size.nodes / size.upstreams));
  const upstreams: Upstream[] = [];
  for (let u = 0; u < size.upstreams; u++) {
    const nodes = [];
    for (let j = 0; j < per; j++) nodes.push({ address: nodeAddress(u * per + j), weight: 1 });
    upstreams.push(
      create(UpstreamSchema, {
        name: upstreamName(u),
        breaker: "default",
        nodes,
        healthCheck: {
          intervalMs: 3_600_000,
          timeoutMs: 1_000,
          unhealthyThreshold,
          healthyThreshold: 2,
        },
      }),
    );
  }
  const routes: Route[] = [];
  for (let i = 0; i < size.routes; i++) routes.push(scaleRoute(size, i, 0));
  return create(SnapshotSchema, {
    version: 100n,
    nonce: "n100",
    createdAtMs: BigInt(Date.now()),
    breakers: [{ name: "default" }],
    upstreams,
    routes,
  });
}

/** Route i of the scale config; `priority` lets a change alter nothing else. */
export function scaleRoute(size: ScaleSize, i: number, priority: number): Route {
  const shape = routeShape(i, size.upstreams);
  return create(RouteSchema, {
    name: shape.name,
    priority,
    match: { path: shape.path ?? "", pathPrefix: shape.pathPrefix ?? "", hosts: shape.hosts ?? [] },
    upstream: shape.upstream,
  });
}

export interface StubControlPlane {
  /** host:port for CLAWGATE_CP_ADDRESSES. */
  address: string;
  /** Whether the data plane's Hello said it takes deltas; false until it connected. */
  acceptsDeltas(): boolean;
  /** Writes an encoded StreamSnapshotsResponse to the data plane's stream. */
  write(bytes: Uint8Array): void;
  /** Resolves once the data plane ACKed `version`; rejects when it NACKed it. */
  answered(version: bigint): Promise<void>;
  close(): void;
}

/**
 * A control plane reduced to its snapshot stream: it answers the data plane's Hello with the
 * given snapshot (encoded before anything is timed) and records ACKs and NACKs. Health reports
 * are not decoded: benchmarks measure the data plane, and a 20,000-node report decoded here
 * would count against it when both share a process.
 */
export async function startStubControlPlane(first: Snapshot): Promise<StubControlPlane> {
  const firstBytes = encodeResponse(
    create(StreamSnapshotsResponseSchema, { message: { case: "snapshot", value: first } }),
  );
  const answers: { version: bigint; ok: boolean; detail: string }[] = [];
  const waiters: (() => void)[] = [];
  let stream: grpc.ServerDuplexStream<StreamSnapshotsRequest, EncodedOrResponse> | undefined;
  let acceptsDeltas = false;
  const server = new grpc.Server({ "grpc.max_send_message_length": -1 });
  const definition = {
    streamSnapshots: {
      ...snapshotServiceDefinition.streamSnapshots,
      requestDeserialize: (bytes: Buffer) =>
        bytes[0] === HEALTH_TAG
          ? ({ message: { case: undefined } } as unknown as StreamSnapshotsRequest)
          : snapshotServiceDefinition.streamSnapshots.requestDeserialize(bytes),
    },
  };
  server.addService(definition, {
    streamSnapshots: (call: grpc.ServerDuplexStream<StreamSnapshotsRequest, EncodedOrResponse>) => {
      call.on("error", () => {});
      // As the control plane does: it takes changes-only health reports, so the data plane
      // sends its whole view once after Hello (in turns) and then what changed. Without it a
      // data plane sends every report as a whole view built in one turn, as to an older control
      // plane, and that turn (70 ms at 20,000 nodes) is what the benchmark measured.
      const headers = new grpc.Metadata();
      headers.set(HEALTH_CHANGES_HEADER, "1");
      call.sendMetadata(headers);
      call.on("data", (request: StreamSnapshotsRequest) => {
        const m = request.message;
        if (m.case === "hello") {
          stream = call;
          acceptsDeltas = (m.value as { acceptsDeltas?: boolean }).acceptsDeltas === true;
          call.write(firstBytes);
        } else if (m.case === "ack" || m.case === "nack") {
          const detail = m.case === "nack" ? m.value.errorDetail : "";
          answers.push({ version: m.value.version, ok: m.case === "ack", detail });
          for (const w of waiters.splice(0)) w();
        }
      });
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  return {
    address: `127.0.0.1:${port}`,
    acceptsDeltas: () => acceptsDeltas,
    write: (bytes) => {
      if (stream === undefined) throw new Error("no data plane has connected to the stub yet");
      stream.write(bytes);
    },
    answered: async (version) => {
      while (!answers.some((a) => a.version === version)) {
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
      const answer = answers.find((a) => a.version === version)!;
      if (!answer.ok) throw new Error(`version ${version} NACKed: ${answer.detail}`);
    },
    close: () => server.forceShutdown(),
  };
}
