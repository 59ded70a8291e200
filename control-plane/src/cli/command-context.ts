import type { AdminClient } from "./admin-client.js";

/** What each clawctl command file needs from the program that registers it. */
export interface CommandContext {
  out(text: string): void;
  err(text: string): void;
  /** The admin API client for --server, --token and --ca-file, built when first needed. */
  client(): Promise<AdminClient>;
  /** Reads a file as UTF-8 (manifests). */
  read(path: string): Promise<string>;
  /** Reads all of stdin (`-f -`). */
  readStdin(): Promise<string>;
  /** Milliseconds since the epoch. */
  now(): number;
  /** True when stdout is a terminal and NO_COLOR is unset: diff colours its lines. */
  colour: boolean;
}

/** `-o` formats every listing command takes. */
export type Format = "table" | "json" | "yaml";

/** A resource as `GET /v1/{kind}` lists it. */
export interface ResourceView {
  name: string;
  revision: number;
  spec: unknown;
}
