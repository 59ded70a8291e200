import { describe, expect, it } from "vitest";
import { z } from "zod";
import { type ConfigError, isConfigError } from "./config-error.js";
import { hostPortSetting } from "./host-port.js";
import { type LoadSettingsOptions, loadSettings } from "./load-settings.js";
import { declareSettings } from "./setting-declaration.js";
import { keepOrigins, settingError, settingOrigin } from "./setting-origins.js";

/** A small plane: one of each kind of setting the two real planes declare. */
const SETTINGS = declareSettings({
  listen: {
    variable: "CLAWGATE_TEST_LISTEN",
    flag: "listen",
    doc: "Where to listen.",
    type: hostPortSetting("listen"),
    default: "127.0.0.1:8000",
  },
  peers: {
    variable: "CLAWGATE_TEST_PEERS",
    flag: "peers",
    doc: "Peers to dial.",
    type: z.array(hostPortSetting("dial")).min(1),
    default: ["127.0.0.1:9000"],
  },
  level: {
    variable: "CLAWGATE_TEST_LEVEL",
    flag: "level",
    doc: "Log level.",
    type: z.enum(["info", "debug"]),
    default: "info",
  },
  timeoutMs: {
    variable: "CLAWGATE_TEST_TIMEOUT_MS",
    flag: "timeout-ms",
    doc: "A whole number.",
    type: z.int().min(0),
    default: 1_000,
  },
  ratio: {
    variable: "CLAWGATE_TEST_RATIO",
    flag: "ratio",
    doc: "A fraction.",
    type: z.number().gt(0).max(1),
    default: 0.5,
  },
  certFile: {
    variable: "CLAWGATE_TEST_CERT_FILE",
    flag: "cert-file",
    doc: "Unset by default.",
    type: z.string().min(1),
  },
  token: {
    variable: "CLAWGATE_TEST_TOKEN",
    flag: "token",
    doc: "A secret.",
    type: z.string().min(16, "must be at least 16 characters"),
    secret: true,
  },
});

const files: Record<string, string> = {
  "/etc/test.yaml": "listen: 0.0.0.0:8001\nlevel: debug\ntimeoutMs: 2000\n",
  "/etc/empty.yaml": "",
  "/etc/typo.yaml": "lisen: 0.0.0.0:8001\n",
  "/etc/list.yaml": "- a\n- b\n",
  "/etc/broken.yaml": "listen: [unclosed\n",
  "/etc/bool-ratio.yaml": "ratio: true\n",
  "/etc/bad-port.yaml": "listen: 127.0.0.1:70000\n",
  "/etc/proto.yaml": "__proto__:\n  level: debug\nconstructor: 1\n",
};

function load(options: Partial<LoadSettingsOptions<typeof SETTINGS>> = {}) {
  return loadSettings(SETTINGS, {
    argv: [],
    env: {},
    readFile: (path) => {
      const text = files[path];
      if (text === undefined) throw new Error(`ENOENT: no such file, open '${path}'`);
      return text;
    },
    ...options,
  });
}

function configError(options: Partial<LoadSettingsOptions<typeof SETTINGS>>): ConfigError {
  try {
    load(options);
  } catch (err) {
    if (isConfigError(err)) return err;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("loadSettings layers", () => {
  it("starts from the declared defaults, leaving undeclared ones unset", () => {
    expect(load()).toEqual({
      listen: "127.0.0.1:8000",
      peers: ["127.0.0.1:9000"],
      level: "info",
      timeoutMs: 1_000,
      ratio: 0.5,
    });
  });

  it("layers file, then env, then flags, each overriding the one before", () => {
    const settings = load({
      argv: ["--config", "/etc/test.yaml", "--level", "info"],
      env: { CLAWGATE_TEST_LISTEN: "127.0.0.1:8002", CLAWGATE_TEST_LEVEL: "debug" },
    });
    expect(settings.listen).toBe("127.0.0.1:8002"); // env over file
    expect(settings.level).toBe("info"); // flag over env over file
    expect(settings.timeoutMs).toBe(2_000); // file over default
    expect(settings.peers).toEqual(["127.0.0.1:9000"]); // default
  });

  it("reads lists as comma lists, and a repeated list flag adds to the list", () => {
    expect(load({ env: { CLAWGATE_TEST_PEERS: "a:1, b:2," } }).peers).toEqual(["a:1", "b:2"]);
    expect(load({ argv: ["--peers=a:1,b:2", "--peers", "c:3"] }).peers).toEqual([
      "a:1",
      "b:2",
      "c:3",
    ]);
  });

  it("reads decimal numbers from text, and takes only real numbers from YAML", () => {
    expect(load({ env: { CLAWGATE_TEST_RATIO: "0.75" } }).ratio).toBe(0.75);
    expect(load({ argv: ["--ratio", ".25"] }).ratio).toBe(0.25);
    expect(configError({ argv: ["--config", "/etc/bool-ratio.yaml"] }).problems[0]).toMatchObject({
      field: "ratio",
      value: true,
      layer: "file /etc/bool-ratio.yaml",
    });
  });

  it("treats an empty variable and an empty file as unset", () => {
    const settings = load({
      argv: ["--config", "/etc/empty.yaml"],
      env: { CLAWGATE_TEST_LISTEN: "", CLAWGATE_TEST_CERT_FILE: "" },
    });
    expect(settings.listen).toBe("127.0.0.1:8000");
    expect(settings.certFile).toBeUndefined();
  });

  it("returns a deeply frozen object and leaves the declared default intact", () => {
    const settings = load();
    expect(Object.isFrozen(settings)).toBe(true);
    expect(Object.isFrozen(settings.peers)).toBe(true);
    expect(() => {
      (settings as { level: string }).level = "debug";
    }).toThrow(TypeError);
    expect(Object.isFrozen(SETTINGS.peers.default)).toBe(false);
  });
});

describe("settingOrigin", () => {
  it("names the layer each loaded value came from, for checks made after loading", () => {
    const settings = load({
      argv: ["--config", "/etc/test.yaml", "--ratio", "0.25"],
      env: { CLAWGATE_TEST_CERT_FILE: "/c" },
    });
    expect(settingOrigin(settings, "listen")).toBe("file /etc/test.yaml");
    expect(settingOrigin(settings, "certFile")).toBe("env CLAWGATE_TEST_CERT_FILE");
    expect(settingOrigin(settings, "ratio")).toBe("flag --ratio");
    expect(settingOrigin(settings, "peers[0]")).toBe("default");
    expect(settingOrigin(settings, "token")).toBe("default");
    expect(settingOrigin(settings, "constructor")).toBe("default");
    expect(settingError(settings, "certFile", "/c", "cannot read it").message).toBe(
      'CLAWGATE_INVALID_CONFIG: certFile = "/c" (from env CLAWGATE_TEST_CERT_FILE): cannot read it',
    );
  });

  it("follows a copy made with keepOrigins, and says settings for one the loader did not make", () => {
    const settings = load({ env: { CLAWGATE_TEST_LEVEL: "debug" } });
    const copy = keepOrigins(settings, { ...settings, extra: 1 });
    expect(settingOrigin(copy, "level")).toBe("env CLAWGATE_TEST_LEVEL");
    expect(settingOrigin(copy, "extra")).toBe("default");
    expect(settingOrigin({ ...settings }, "level")).toBe("settings");
  });
});

describe("loadSettings errors", () => {
  it("carry the one code, and name the field, the value and the variable it came from", () => {
    const err = configError({ env: { CLAWGATE_TEST_LISTEN: "8080" } });
    expect(err.code).toBe("CLAWGATE_INVALID_CONFIG");
    expect(err.field).toBe("listen");
    expect(err.problems[0]).toMatchObject({ value: "8080", layer: "env CLAWGATE_TEST_LISTEN" });
    expect(err.message).toContain('listen = "8080" (from env CLAWGATE_TEST_LISTEN)');
  });

  it("name the flag a bad value came from, even when env also set the field", () => {
    const err = configError({ env: { CLAWGATE_TEST_LEVEL: "debug" }, argv: ["--level", "loud"] });
    expect(err.problems[0]).toMatchObject({ field: "level", value: "loud", layer: "flag --level" });
  });

  it("name the file a bad value came from, and the list item that is wrong", () => {
    expect(configError({ argv: ["--config", "/etc/bad-port.yaml"] }).problems[0]).toEqual({
      field: "listen",
      value: "127.0.0.1:70000",
      layer: "file /etc/bad-port.yaml",
      reason: "port must be 0-65535",
    });
    expect(configError({ env: { CLAWGATE_TEST_PEERS: "a:1,b:0" } }).problems).toEqual([
      {
        field: "peers[1]",
        value: "b:0",
        layer: "env CLAWGATE_TEST_PEERS",
        reason: "port must be 1-65535",
      },
    ]);
  });

  it("keep a secret's value out of the message", () => {
    const err = configError({ env: { CLAWGATE_TEST_TOKEN: "hunter2" } });
    expect(err.problems[0]).toMatchObject({ field: "token", layer: "env CLAWGATE_TEST_TOKEN" });
    expect(err.message).not.toContain("hunter2");
  });

  it("refuse a misspelt key in the file, listing the known ones", () => {
    const problem = configError({ argv: ["--config", "/etc/typo.yaml"] }).problems[0];
    expect(problem).toMatchObject({ field: "lisen", layer: "file /etc/typo.yaml" });
    expect(problem?.reason).toContain("known settings: listen, peers");
  });

  it("report prototype keys in the file as unknown settings instead of applying them", () => {
    const err = configError({ argv: ["--config", "/etc/proto.yaml"] });
    expect(err.problems).toEqual([
      expect.objectContaining({ field: "__proto__", layer: "file /etc/proto.yaml" }),
      expect.objectContaining({ field: "constructor", value: 1, layer: "file /etc/proto.yaml" }),
    ]);
  });

  it("refuse a file that is missing, not YAML or not a mapping", () => {
    expect(configError({ argv: ["--config", "/nope.yaml"] }).problems[0]).toMatchObject({
      field: "config",
      value: "/nope.yaml",
      layer: "flag --config",
      reason: expect.stringMatching(/^cannot read it: ENOENT/),
    });
    expect(configError({ argv: ["--config", "/etc/broken.yaml"] }).problems[0]?.reason).toMatch(
      /^is not valid YAML/,
    );
    expect(configError({ argv: ["--config", "/etc/list.yaml"] }).problems[0]).toMatchObject({
      field: "config",
      reason: "must be a YAML mapping of settings",
    });
  });

  it("refuse unknown flags, flags without a value and stray arguments, each by name", () => {
    const err = configError({ argv: ["--lisen", "x", "--level"] });
    expect(err.problems.map((problem) => problem.field)).toEqual([
      "--lisen",
      "arguments",
      "--level",
    ]);
    expect(err.problems[0]?.reason).toContain("known flags: --config, --listen");
    expect(err.problems[2]?.reason).toContain("needs a value");
  });

  it("name a bad flag together with the env and file layers' own problems", () => {
    const err = configError({
      argv: ["--bogus=1", "--config", "/etc/bad-port.yaml"],
      env: { CLAWGATE_TEST_LEVEL: "loud" },
    });
    expect(err.problems.map((problem) => `${problem.field} (from ${problem.layer})`)).toEqual([
      "--bogus (from flag --bogus)",
      "listen (from file /etc/bad-port.yaml)",
      "level (from env CLAWGATE_TEST_LEVEL)",
    ]);
    expect(err.message).toContain('--bogus = "1" (from flag --bogus): unknown flag');
    expect(err.message).toContain('level = "loud" (from env CLAWGATE_TEST_LEVEL)');
  });

  it("name a file that cannot be read together with a bad env value and the cross checks", () => {
    const err = configError({
      argv: ["--config", "/nope.yaml"],
      env: { CLAWGATE_TEST_CERT_FILE: "/c" },
      check: (settings, originOf) => [
        { field: "certFile", value: settings.certFile, layer: originOf("certFile"), reason: "x" },
      ],
    });
    expect(err.problems.map((problem) => problem.layer)).toEqual([
      "flag --config",
      "env CLAWGATE_TEST_CERT_FILE",
    ]);
  });

  it("report every bad field at once", () => {
    const err = configError({ env: { CLAWGATE_TEST_LISTEN: "nope", CLAWGATE_TEST_LEVEL: "loud" } });
    expect(err.problems.map((problem) => problem.field).sort()).toEqual(["level", "listen"]);
  });

  it("come from the plane's own cross-setting check, with the layer of each field", () => {
    const err = configError({
      env: { CLAWGATE_TEST_CERT_FILE: "/c" },
      check: (settings, originOf) =>
        settings.certFile !== undefined && settings.ratio === 0.5
          ? [
              {
                field: "certFile",
                value: settings.certFile,
                layer: originOf("certFile"),
                reason: `needs ratio (from ${originOf("ratio")})`,
              },
            ]
          : [],
    });
    expect(err.problems).toEqual([
      {
        field: "certFile",
        value: "/c",
        layer: "env CLAWGATE_TEST_CERT_FILE",
        reason: "needs ratio (from default)",
      },
    ]);
  });
});
