import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { getJson } from "../api.js";
import { ago, matches } from "../format.js";
import { Pager, pageOf } from "../paged.js";
import { useLoad } from "./use-load.js";

const STATES = ["SYNCED", "SYNCING", "STALE", "NACKED", "DISCONNECTED"];
const PAGE = 50;

/**
 * The published version and every data plane of every control-plane replica: applied version,
 * state, lag, last NACK and the replica it streams from.
 */
export function FleetView({ token, bus, epoch }) {
  const [query, setQuery] = useState("");
  const [state, setState] = useState("");
  const [page, setPage] = useState(0);
  const [{ value, error }, set] = useLoad(
    async (signal) => {
      const [snapshot, planes] = await Promise.all([
        getJson(token, "/v1/snapshot", signal),
        getJson(token, "/v1/dataplanes", signal),
      ]);
      return { snapshot, planes: planes.items };
    },
    [token, epoch],
  );

  useEffect(() => {
    const offPlane = bus.on("dataplane", (plane) =>
      set((old) => {
        if (old.value === undefined) return old;
        const planes = old.value.planes.filter((p) => p.nodeId !== plane.nodeId);
        planes.push(plane);
        planes.sort((a, b) => a.nodeId.localeCompare(b.nodeId));
        return { ...old, value: { ...old.value, planes } };
      }),
    );
    // A publish changes every data plane's lag and state: read them again, once per publish.
    const offSnapshot = bus.on("snapshot", async (snapshot) => {
      const planes = await getJson(token, "/v1/dataplanes").catch(() => undefined);
      set((old) =>
        old.value === undefined
          ? old
          : { ...old, value: { snapshot, planes: planes?.items ?? old.value.planes } },
      );
    });
    return () => {
      offPlane();
      offSnapshot();
    };
  }, [bus, token]);

  if (value === undefined) return html`<${Loading} error=${error} />`;
  const { snapshot, planes } = value;
  const counts = Object.fromEntries(STATES.map((s) => [s, 0]));
  for (const plane of planes) counts[plane.state] += 1;
  const shown = planes.filter(
    (p) => (state === "" || p.state === state) && matches(`${p.nodeId} ${p.hostname}`, query),
  );
  const paged = pageOf(shown, page, PAGE);

  return html`<section aria-labelledby="fleet-title">
    <h2 id="fleet-title">Fleet</h2>
    ${error === "" ? null : html`<p class="error" role="alert">${error}</p>`}
    <dl class="cards">
      <div>
        <dt>Published version</dt>
        <dd id="published-version">${snapshot.publishedVersion ?? "none yet"}</dd>
      </div>
      ${STATES.map(
        (s) =>
          html`<div><dt>${s}</dt><dd><span class=${`badge ${s}`}>${counts[s]}</span></dd></div>`,
      )}
    </dl>
    ${
      snapshot.published === false && snapshot.reason !== undefined
        ? html`<p class="error" role="alert">Version ${snapshot.version} not published: ${snapshot.reason}</p>`
        : null
    }
    <div class="filters">
      <label>Node id or host <input type="search" value=${query}
        onInput=${(e) => {
          setQuery(e.currentTarget.value);
          setPage(0);
        }} /></label>
      <label>State <select value=${state}
        onChange=${(e) => {
          setState(e.currentTarget.value);
          setPage(0);
        }}>
        <option value="">any</option>
        ${STATES.map((s) => html`<option value=${s}>${s}</option>`)}
      </select></label>
    </div>
    <div class="scroll">
      <table id="dataplanes">
        <caption class="sr-only">Data planes</caption>
        <thead><tr>
          <th scope="col">Node id</th><th scope="col">Host</th><th scope="col">State</th>
          <th scope="col">Applied</th><th scope="col">Lag</th><th scope="col">Last NACK</th>
          <th scope="col">Last seen</th><th scope="col">Replica</th>
        </tr></thead>
        <tbody>
          ${paged.rows.map((p) => {
            const lag =
              p.publishedVersion === null ? "" : Math.max(0, p.publishedVersion - p.appliedVersion);
            return html`<tr key=${p.nodeId} data-node-id=${p.nodeId} data-state=${p.state}>
              <th scope="row">${p.nodeId}</th>
              <td>${p.hostname}</td>
              <td><span class=${`badge ${p.state}`}>${p.state}</span></td>
              <td class="num" data-applied>${p.appliedVersion}</td>
              <td class="num">${lag === 0 ? "0" : lag === "" ? "" : `${lag} behind`}</td>
              <td>${
                p.lastNack === undefined
                  ? "none"
                  : html`v${p.lastNack.version}: ${p.lastNack.error}
                <small>(${ago(p.lastNack.at)})</small>`
              }</td>
              <td><time datetime=${p.lastSeen} title=${p.lastSeen}>${ago(p.lastSeen)}</time></td>
              <td data-replica>${p.replica ?? ""}</td>
            </tr>`;
          })}
        </tbody>
      </table>
    </div>
    <${Pager} label="data planes" page=${paged.page} pages=${paged.pages} total=${shown.length}
      onPage=${setPage} />
  </section>`;
}

export function Loading({ error }) {
  return error === ""
    ? html`<p role="status">Loading…</p>`
    : html`<p class="error" role="alert">${error}</p>`;
}
