import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { explain, getAllPages, getJson } from "../api.js";
import { clock, matches } from "../format.js";
import { Pager, pageOf } from "../paged.js";
import { diffConfigs, fieldChanges } from "./config-diff.js";
import { Loading } from "./fleet.js";
import { useLoad } from "./use-load.js";

const KINDS = ["routes", "upstreams", "breakers", "tenants"];
const PAGE = 50;

/** The config read-only, each resource with the version it came in; and history diffs. */
export function ConfigView({ token, epoch }) {
  const [kind, setKind] = useState("routes");
  const [query, setQuery] = useState("");
  const [page, setPage] = useState(0);
  const [{ value, error }] = useLoad(
    (signal) => getAllPages(token, `/v1/${kind}`, signal),
    [token, kind, epoch],
  );
  const shown = (value ?? []).filter((r) => matches(r.name, query));
  const paged = pageOf(shown, page, PAGE);

  return html`<section aria-labelledby="config-title">
    <h2 id="config-title">Config</h2>
    <div class="filters">
      <label>Kind <select value=${kind}
        onChange=${(e) => {
          setKind(e.currentTarget.value);
          setPage(0);
        }}>
        ${KINDS.map((k) => html`<option value=${k}>${k}</option>`)}
      </select></label>
      <label>Name <input type="search" value=${query}
        onInput=${(e) => {
          setQuery(e.currentTarget.value);
          setPage(0);
        }} /></label>
    </div>
    ${
      value === undefined
        ? html`<${Loading} error=${error} />`
        : html`<div class="scroll"><table id="resources">
            <caption class="sr-only">${kind}</caption>
            <thead><tr><th scope="col">Name</th><th scope="col">Version</th><th scope="col">Spec</th></tr></thead>
            <tbody>
              ${paged.rows.map(
                (r) => html`<tr key=${r.name}>
                  <th scope="row">${r.name}</th>
                  <td class="num">${r.revision}</td>
                  <td><details><summary>${summary(kind, r.spec)}</summary>
                    <pre>${JSON.stringify(r.spec, null, 2)}</pre></details></td>
                </tr>`,
              )}
            </tbody>
          </table></div>
          <${Pager} label=${kind} page=${paged.page} pages=${paged.pages} total=${shown.length}
            onPage=${setPage} />`
    }
    <${HistoryDiff} token=${token} epoch=${epoch} />
  </section>`;
}

/** A one-line gist of a resource, so the table reads without opening every row. */
function summary(kind, spec) {
  if (kind === "routes") {
    const match = spec.match ?? {};
    return `${match.hosts?.length ? match.hosts.join(",") : "*"}${match.pathPrefix ?? match.path ?? ""} → ${spec.upstream ?? "split"}`;
  }
  if (kind === "upstreams") return `${spec.nodes?.length ?? 0} nodes, breaker ${spec.breaker}`;
  if (kind === "breakers")
    return `${spec.consecutiveFailures} failures, cooldown ${spec.cooldownMs} ms`;
  return `${spec.requestsPerMinute} req/min`;
}

function HistoryDiff({ token, epoch }) {
  const [{ value, error }] = useLoad(
    async (signal) => (await getJson(token, "/v1/history?limit=200", signal)).items,
    [token, epoch],
  );
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const [diff, setDiff] = useState(undefined);
  const [diffError, setDiffError] = useState("");

  if (value === undefined) {
    return error === "" ? null : html`<p class="hint">History: ${error}</p>`;
  }
  if (value.length < 2) return html`<p class="hint">History: a diff needs two versions.</p>`;
  const older = from === "" ? String(value[1].version) : from;
  const newer = to === "" ? String(value[0].version) : to;
  const compare = async (event) => {
    event.preventDefault();
    try {
      const [a, b] = await Promise.all([
        getJson(token, `/v1/history/${older}`),
        getJson(token, `/v1/history/${newer}`),
      ]);
      setDiff({ from: older, to: newer, changes: diffConfigs(a.resources, b.resources) });
      setDiffError("");
    } catch (failure) {
      setDiffError(explain(failure));
    }
  };
  const option = (item) =>
    html`<option value=${item.version}>v${item.version}, ${clock(item.time)}, ${item.author}: ${item.summary}</option>`;
  return html`<section aria-labelledby="diff-title" class="diff">
    <h3 id="diff-title">What changed between two versions</h3>
    <form class="filters" onSubmit=${compare}>
      <label>From <select value=${older} onChange=${(e) => setFrom(e.currentTarget.value)}>
        ${value.map(option)}</select></label>
      <label>To <select value=${newer} onChange=${(e) => setTo(e.currentTarget.value)}>
        ${value.map(option)}</select></label>
      <button type="submit">Compare</button>
    </form>
    ${diffError === "" ? null : html`<p class="error" role="alert">${diffError}</p>`}
    ${
      diff === undefined
        ? null
        : diff.changes.length === 0
          ? html`<p>v${diff.from} and v${diff.to} hold the same config.</p>`
          : html`<ul class="changes">${diff.changes.map(
              (c) => html`<li data-change=${c.change}>
                <span class=${`badge ${c.change}`}>${c.change}</span> ${c.kind}/${c.name}
                ${
                  c.change === "changed"
                    ? html`<ul class="fields">${fieldChanges(c.before, c.after).map(
                        (f) =>
                          html`<li><code>${f.path}</code>: <del>${f.before ?? "(none)"}</del>${" → "}<ins>${f.after ?? "(none)"}</ins></li>`,
                      )}</ul>`
                    : null
                }
                <details><summary>Whole documents</summary><div class="sides">
                  ${c.before === undefined ? null : html`<pre aria-label="before">${JSON.stringify(c.before, null, 2)}</pre>`}
                  ${c.after === undefined ? null : html`<pre aria-label="after">${JSON.stringify(c.after, null, 2)}</pre>`}
                </div></details>
              </li>`,
            )}</ul>`
    }
  </section>`;
}
