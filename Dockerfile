# One image for both planes: clawgate-control-plane and clawgate-data-plane on PATH, run as the
# non-root uid the Helm chart expects (10001).

# Build stage: the toolchain is needed for the data plane's native sd_notify socket (unix-dgram).
FROM node:20-bookworm AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.base.json tsconfig.json ./
COPY proto/package.json proto/
COPY runtime/package.json runtime/
COPY control-plane/package.json control-plane/
COPY data-plane/package.json data-plane/
COPY e2e/package.json e2e/
RUN npm ci --no-audit --no-fund
COPY . .
RUN npx tsc -b proto runtime control-plane data-plane \
 && npm prune --omit=dev --workspace @clawgate/proto --workspace @clawgate/runtime \
      --workspace @clawgate/control-plane \
      --workspace @clawgate/data-plane --include-workspace-root=false

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /opt/clawgate
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/package.json ./
COPY --from=build /src/proto/package.json proto/
COPY --from=build /src/proto/dist proto/dist
COPY --from=build /src/runtime/package.json runtime/
COPY --from=build /src/runtime/dist runtime/dist
COPY --from=build /src/control-plane/package.json control-plane/
COPY --from=build /src/control-plane/dist control-plane/dist
COPY --from=build /src/data-plane/package.json data-plane/
COPY --from=build /src/data-plane/dist data-plane/dist
RUN ln -s /opt/clawgate/control-plane/dist/bin/clawgate-control-plane.js /usr/local/bin/clawgate-control-plane \
 && ln -s /opt/clawgate/control-plane/dist/bin/clawctl.js /usr/local/bin/clawctl \
 && ln -s /opt/clawgate/data-plane/dist/bin/clawgate-data-plane.js /usr/local/bin/clawgate-data-plane \
 && chmod +x /opt/clawgate/*/dist/bin/*.js \
 && groupadd --system --gid 10001 clawgate \
 && useradd --system --uid 10001 --gid 10001 --no-create-home clawgate
USER 10001:10001
