import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["{control-plane,data-plane,proto,runtime,e2e}/src/**/*.test.ts"],
    // e2e tests spawn real processes (etcd, control plane, data planes); give them room,
    // but every wait inside them is on an event, not a sleep.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});
