import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const here = dirname(fileURLToPath(import.meta.url));
const protoSources = resolve(here, "../../../../proto/src");
/** Package subpaths the worker may load, and the source each one is built from. */
const LEAF_PACKAGES: Record<string, string> = {
  "@clawgate/proto/origin-form": resolve(protoSources, "config/origin-form.ts"),
};

/** Every module the worker thread loads from its entry: relative files and package names. */
function moduleGraph(entry: string): { files: string[]; packages: Set<string> } {
  const files: string[] = [];
  const packages = new Set<string>();
  const pending = [entry];
  while (pending.length > 0) {
    const file = pending.pop()!;
    if (files.includes(file)) continue;
    files.push(file);
    const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    for (const { fileName } of info.importedFiles) {
      if (fileName.startsWith("."))
        pending.push(resolve(dirname(file), fileName.replace(/\.js$/, ".ts")));
      else if (LEAF_PACKAGES[fileName] !== undefined) {
        packages.add(fileName);
        pending.push(LEAF_PACKAGES[fileName]);
      } else packages.add(fileName);
    }
  }
  return { files, packages };
}

/**
 * Modules a file loads when it is evaluated: its import declarations that are not type-only
 * (an `import()` runs only when its code does).
 */
function staticImports(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022);
  const names: string[] = [];
  for (const statement of source.statements) {
    if (!ts.isImportDeclaration(statement) || statement.importClause?.isTypeOnly) continue;
    if (ts.isStringLiteral(statement.moduleSpecifier)) names.push(statement.moduleSpecifier.text);
  }
  return names;
}

describe("the probe worker thread", () => {
  // Most health checks are TCP only. Node's HTTP and TLS modules are compiled in each isolate
  // that loads them: loaded at the thread's start they were about a fifth of its CPU at boot.
  it("loads Node's HTTP and TLS modules only when a probe needs them", () => {
    const { files } = moduleGraph(resolve(here, "probe-worker.ts"));
    const loadedAtStart = files.flatMap(staticImports);
    expect(loadedAtStart).toContain("node:net");
    for (const lazy of ["node:http", "node:https", "node:tls"]) {
      expect(loadedAtStart, lazy).not.toContain(lazy);
    }
  });

  // Each module a worker loads lives in its own V8 heap: the @clawgate/proto barrel (the whole
  // config model: zod schemas, protobuf descriptors) cost the thread about 18 MiB of resident
  // memory for one path check. Type-only imports are erased and load nothing.
  it("loads only Node's networking modules and leaf modules, never a package barrel", () => {
    const { files, packages } = moduleGraph(resolve(here, "probe-worker.ts"));
    const loaded = [...packages].filter((name) => !name.startsWith("node:"));
    expect(loaded).toEqual(["@clawgate/proto/origin-form"]);
    expect(files.some((file) => file.endsWith("origin-form.ts"))).toBe(true);
  });
});
