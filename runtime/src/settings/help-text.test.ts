import { describe, expect, it } from "vitest";
import { z } from "zod";
import { helpOrVersion, type ProgramInfo, renderHelp } from "./help-text.js";
import { declareSettings } from "./setting-declaration.js";

const INFO: ProgramInfo = {
  program: "clawgate-test",
  summary: "A test binary.",
  version: "1.2.3",
  settings: declareSettings({
    listen: {
      variable: "CLAWGATE_TEST_LISTEN",
      flag: "listen",
      doc: "Where to listen.",
      type: z.string(),
      default: "127.0.0.1:8000",
    },
    peers: {
      variable: "CLAWGATE_TEST_PEERS",
      flag: "peers",
      doc: "Peers to dial.",
      type: z.array(z.string()),
      default: ["a:1", "b:2"],
    },
    level: {
      variable: "CLAWGATE_TEST_LEVEL",
      flag: "level",
      doc: "Log level.",
      type: z.enum(["info", "debug"]),
      default: "info",
    },
    nodeId: {
      variable: "CLAWGATE_TEST_NODE_ID",
      flag: "node-id",
      doc: "Computed at boot.",
      type: z.string(),
      defaultText: "hostname-port",
    },
    certFile: {
      variable: "CLAWGATE_TEST_CERT_FILE",
      flag: "cert-file",
      doc: "Unset by default.",
      type: z.string(),
    },
  }),
};

describe("--help and --version", () => {
  it("lists every setting with its flag, variable, default and doc", () => {
    const help = renderHelp(INFO);
    expect(help).toContain("Usage: clawgate-test [--config FILE]");
    expect(help).toContain("A test binary.");
    expect(help).toContain(
      "  listen\n      --listen VALUE, CLAWGATE_TEST_LISTEN (default: 127.0.0.1:8000)\n      Where to listen.\n",
    );
    expect(help).toContain("--peers A,B,..., CLAWGATE_TEST_PEERS (default: a:1,b:2)");
    expect(help).toContain("--level info|debug, CLAWGATE_TEST_LEVEL (default: info)");
    expect(help).toContain("--node-id VALUE, CLAWGATE_TEST_NODE_ID (default: hostname-port)");
    expect(help).toContain("--cert-file VALUE, CLAWGATE_TEST_CERT_FILE (default: none)");
  });

  it.each([
    [["--help"], "help"],
    [["-h"], "help"],
    [["--listen", "x", "--help"], "help"],
    [["--version", "--help"], "help"],
    [["--version"], "version"],
    [["-V"], "version"],
  ])("%j asks for the %s", (argv, kind) => {
    const text = helpOrVersion(argv, INFO);
    expect(text).toBe(kind === "help" ? renderHelp(INFO) : "clawgate-test 1.2.3\n");
  });

  it("is not asked for by settings alone, good or bad", () => {
    expect(helpOrVersion([], INFO)).toBeUndefined();
    expect(helpOrVersion(["--listen", "x", "--bogus"], INFO)).toBeUndefined();
  });
});
