import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { loadSettings } from "./load-settings.js";
import { declareSettings } from "./setting-declaration.js";

const SETTINGS = declareSettings({
  level: {
    variable: "CLAWGATE_TEST_LEVEL",
    flag: "level",
    doc: "Log level.",
    type: z.enum(["info", "debug"]),
    default: "info",
  },
});

/** Whether any module of the yaml package is loaded in this process (vitest: one per file). */
function yamlLoaded(): boolean {
  const cache = createRequire(import.meta.url).cache;
  return Object.keys(cache).some((file) => /[\\/]node_modules[\\/]yaml[\\/]/.test(file));
}

describe("the YAML parser", () => {
  // Every process reads its settings, few of them from a file: the parser stays out of the
  // resident set of those that don't.
  it("is loaded only when a --config file is read", () => {
    const fromEnv = loadSettings(SETTINGS, { argv: [], env: { CLAWGATE_TEST_LEVEL: "debug" } });
    expect(fromEnv.level).toBe("debug");
    expect(yamlLoaded()).toBe(false);

    const fromFile = loadSettings(SETTINGS, {
      argv: ["--config", "plane.yaml"],
      env: {},
      readFile: () => "level: debug\n",
    });
    expect(fromFile.level).toBe("debug");
    expect(yamlLoaded()).toBe(true);
  });
});
