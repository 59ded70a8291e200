# One image for both planes and clawctl. `docker run IMAGE control-plane|data-plane|clawctl
# [flags]` picks the binary (deploy/docker/clawgate); with no command it prints usage. The
# binaries are also on PATH by name, which is how the Helm chart starts them. Runs as uid 10001,
# the chart's runAsUser.

# Production dependencies only, so the image carries no compiler, test runner or linter. The
# toolchain of the full image is needed here: unix-dgram (sd_notify) is a native module.
FROM node:20-bookworm AS prod-deps
WORKDIR /src
COPY package.json package-lock.json .npmrc ./
COPY proto/package.json proto/
COPY runtime/package.json runtime/
COPY control-plane/package.json control-plane/
COPY control-plane/bin control-plane/bin
COPY data-plane/package.json data-plane/
COPY data-plane/bin data-plane/bin
COPY e2e/package.json e2e/
RUN npm ci --omit=dev --no-audit --no-fund --workspace @clawgate/proto --workspace @clawgate/runtime --workspace @clawgate/control-plane --workspace @clawgate/data-plane --include-workspace-root=false

# The compiler: every dependency, install scripts skipped (nothing native is needed to type-check).
FROM node:20-bookworm AS build
WORKDIR /src
COPY package.json package-lock.json .npmrc ./
COPY proto/package.json proto/
COPY runtime/package.json runtime/
COPY control-plane/package.json control-plane/
COPY control-plane/bin control-plane/bin
COPY data-plane/package.json data-plane/
COPY data-plane/bin data-plane/bin
COPY e2e/package.json e2e/
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.base.json tsconfig.json ./
COPY proto proto
COPY runtime runtime
COPY control-plane control-plane
COPY data-plane data-plane
RUN npx tsc -b proto runtime control-plane data-plane && npm run build:console

FROM node:20-bookworm-slim
# tini as PID 1 forwards signals and reaps the remediation commands the control plane runs.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 clawgate \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/clawgate --no-create-home clawgate \
 && mkdir -p /var/lib/clawgate \
 && chown 10001:10001 /var/lib/clawgate
WORKDIR /opt/clawgate
COPY --from=prod-deps /src/node_modules node_modules
COPY package.json ./
COPY proto/package.json proto/
COPY --from=build /src/proto/dist proto/dist
COPY runtime/package.json runtime/
COPY --from=build /src/runtime/dist runtime/dist
COPY control-plane/package.json control-plane/
COPY control-plane/bin control-plane/bin
COPY --from=build /src/control-plane/dist control-plane/dist
COPY --from=build /src/control-plane/ui/dist control-plane/ui/dist
COPY data-plane/package.json data-plane/
COPY data-plane/bin data-plane/bin
COPY --from=build /src/data-plane/dist data-plane/dist
COPY deploy/docker/clawgate deploy/docker/healthcheck.mjs deploy/docker/
RUN ln -s /opt/clawgate/control-plane/bin/clawgate-control-plane.js /usr/local/bin/clawgate-control-plane \
 && ln -s /opt/clawgate/control-plane/bin/clawctl.js /usr/local/bin/clawctl \
 && ln -s /opt/clawgate/data-plane/bin/clawgate-data-plane.js /usr/local/bin/clawgate-data-plane \
 && ln -s /opt/clawgate/deploy/docker/clawgate /usr/local/bin/clawgate
# Inside a container, loopback is unreachable from outside: listen on every interface (the admin
# API still wants its token). Relative defaults (the embedded store, the admin token file, the
# data plane's snapshot cache) land in the working directory, the one place uid 10001 may write:
# mount a volume there to keep them across restarts.
ENV NODE_ENV=production \
    CLAWGATE_ADMIN_LISTEN=0.0.0.0:9180 \
    CLAWGATE_GRPC_LISTEN=0.0.0.0:9190 \
    CLAWGATE_DP_ADMIN_LISTEN=0.0.0.0:9901
WORKDIR /var/lib/clawgate
USER 10001:10001
# Proxy, data-plane admin, control-plane admin API, control-plane snapshot stream.
EXPOSE 8080 9901 9180 9190
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "/opt/clawgate/deploy/docker/healthcheck.mjs"]
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/clawgate"]
CMD ["help"]
