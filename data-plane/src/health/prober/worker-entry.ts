import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

/**
 * Where to start the probe worker. From the compiled dist it is `probe-worker.js` beside this
 * file. When this module runs from TypeScript sources (vitest, which transforms in its own
 * process only), the worker is a plain Node thread that cannot load `.ts`: it then boots from a
 * small data: URL that registers module hooks transpiling the worker's `.ts` files with the
 * TypeScript compiler (a root devDependency, present wherever sources are run) and imports
 * `probe-worker.ts`. The dist path never loads TypeScript.
 */
export function probeWorkerUrl(): URL {
  const self = import.meta.url;
  if (!self.endsWith(".ts")) return new URL("./probe-worker.js", self);
  const typescript = pathToFileURL(createRequire(self).resolve("typescript")).href;
  const entry = new URL("./probe-worker.ts", self).href;
  const boot = [
    `import { register } from "node:module";`,
    `register(${JSON.stringify(dataUrl(TS_HOOKS))}, { data: { typescript: ${JSON.stringify(typescript)} } });`,
    `await import(${JSON.stringify(entry)});`,
  ].join("\n");
  return new URL(dataUrl(boot));
}

function dataUrl(source: string): string {
  return `data:text/javascript,${encodeURIComponent(source)}`;
}

// Module hooks (plain JS, run on Node's loader thread): "./x.js" falls back to "./x.ts" the way
// TypeScript's NodeNext imports expect, and .ts files are transpiled (types erased) on load.
const TS_HOOKS = `
let ts;
export async function initialize(data) {
  ts = (await import(data.typescript)).default;
}
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (err) {
    const relative = specifier.startsWith("./") || specifier.startsWith("../");
    if (err && err.code === "ERR_MODULE_NOT_FOUND" && relative && specifier.endsWith(".js")) {
      return next(specifier.slice(0, -3) + ".ts", context);
    }
    throw err;
  }
}
export async function load(url, context, next) {
  if (!url.startsWith("file:") || !url.endsWith(".ts")) return next(url, context);
  const { readFile } = await import("node:fs/promises");
  const source = await readFile(new URL(url), "utf8");
  const output = ts.transpileModule(source, {
    fileName: url,
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, sourceMap: false },
  });
  return { format: "module", source: output.outputText, shortCircuit: true };
}
`;
