import { resolve } from "node:path";
import { ClawctlError, EXIT_USAGE } from "./clawctl-error.js";

/** Where a control plane started without a token writes the one it generates. */
export const DEFAULT_TOKEN_FILE = "./.clawgate/admin-token";

export interface TokenSources {
  /** --token, when given. */
  flag: string | undefined;
  env: NodeJS.ProcessEnv;
  read: (path: string) => Promise<string>;
}

/** A token and where it came from, or every place looked at and what was there. */
export type TokenLookup =
  | { token: string; source: string }
  | { token: undefined; looked: readonly string[] };

/**
 * Finds the admin token the way the README tells: --token, then CLAWGATE_ADMIN_TOKEN, then the
 * file named by CLAWGATE_ADMIN_TOKEN_FILE, then ./.clawgate/admin-token (where a control plane
 * started without a token, and `npm run dev`, write one). Finding none is not an error here: the
 * API decides, and only when it answers 401 does clawctl say where it looked.
 */
export async function lookUpToken(sources: TokenSources): Promise<TokenLookup> {
  const { flag, env, read } = sources;
  if (flag !== undefined && flag !== "") return { token: flag, source: "--token" };
  if (env.CLAWGATE_ADMIN_TOKEN) {
    return { token: env.CLAWGATE_ADMIN_TOKEN, source: "CLAWGATE_ADMIN_TOKEN" };
  }
  const looked = ["--token: not given", "CLAWGATE_ADMIN_TOKEN: not set"];
  const named = env.CLAWGATE_ADMIN_TOKEN_FILE;
  if (named) {
    // Named on purpose: a file that cannot be read is a mistake to report, not to skip.
    let text: string;
    try {
      text = await read(named);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new ClawctlError(
        `cannot read the token file ${resolve(named)} named by CLAWGATE_ADMIN_TOKEN_FILE: ${reason}`,
        EXIT_USAGE,
      );
    }
    const token = text.trim();
    if (token !== "") return { token, source: `${resolve(named)} (CLAWGATE_ADMIN_TOKEN_FILE)` };
    return {
      token: undefined,
      looked: [...looked, `CLAWGATE_ADMIN_TOKEN_FILE: ${resolve(named)} is empty`],
    };
  }
  looked.push("CLAWGATE_ADMIN_TOKEN_FILE: not set");
  const file = resolve(DEFAULT_TOKEN_FILE);
  try {
    const token = (await read(DEFAULT_TOKEN_FILE)).trim();
    if (token !== "") return { token, source: file };
    looked.push(`${file}: empty`);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    looked.push(`${file}: ${code === "ENOENT" || code === undefined ? "no such file" : code}`);
  }
  return { token: undefined, looked };
}

/** What to tell a user the admin API refused, given where the token came from. */
export function unauthorizedHint(lookup: TokenLookup): string[] {
  if (lookup.token !== undefined) {
    return [`  the admin API refused the token from ${lookup.source}`];
  }
  return [
    "  clawctl found no admin token; it looked at:",
    ...lookup.looked.map((place) => `    ${place}`),
    "  fix: pass --token <token>, set CLAWGATE_ADMIN_TOKEN or CLAWGATE_ADMIN_TOKEN_FILE, or run",
    "  clawctl from the directory the control plane (or npm run dev) was started in, where it",
    `  writes ${DEFAULT_TOKEN_FILE}`,
  ];
}
