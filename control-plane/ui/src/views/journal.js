import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { getJson } from "../api.js";
import { Pager, pageOf } from "../paged.js";
import { Loading } from "./fleet.js";
import { HealItem } from "./upstreams.js";
import { useLoad } from "./use-load.js";

const ACTIONS = [
  "quarantine",
  "evict",
  "readmit",
  "remediation_attempt",
  "remediation_result",
  "registry_expiry",
];
const PAGE = 50;
/** The journal keeps 1000 events by default; the API returns at most that many. */
const KEPT = 1000;

/** The heal journal as a timeline, newest first, filterable by upstream and action; live. */
export function JournalView({ token, bus, epoch }) {
  const [upstream, setUpstream] = useState("");
  const [action, setAction] = useState("");
  const [page, setPage] = useState(0);
  const [{ value, error }, set] = useLoad(
    async (signal) => (await getJson(token, `/v1/events?limit=${KEPT}`, signal)).items,
    [token, epoch],
  );

  useEffect(
    () =>
      bus.on("heal", (event) =>
        set((old) =>
          old.value === undefined || old.value.some((e) => e.id === event.id)
            ? old
            : { ...old, value: [event, ...old.value].slice(0, KEPT) },
        ),
      ),
    [bus],
  );

  if (value === undefined) return html`<${Loading} error=${error} />`;
  const upstreams = [...new Set(value.map((e) => e.upstream))].sort();
  const shown = value.filter(
    (e) => (upstream === "" || e.upstream === upstream) && (action === "" || e.action === action),
  );
  const paged = pageOf(shown, page, PAGE);
  return html`<section aria-labelledby="journal-title">
    <h2 id="journal-title">Journal</h2>
    ${error === "" ? null : html`<p class="error" role="alert">${error}</p>`}
    <div class="filters">
      <label>Upstream <select value=${upstream}
        onChange=${(e) => {
          setUpstream(e.currentTarget.value);
          setPage(0);
        }}>
        <option value="">any</option>
        ${upstreams.map((u) => html`<option value=${u}>${u}</option>`)}
      </select></label>
      <label>Action <select value=${action}
        onChange=${(e) => {
          setAction(e.currentTarget.value);
          setPage(0);
        }}>
        <option value="">any</option>
        ${ACTIONS.map((a) => html`<option value=${a}>${a}</option>`)}
      </select></label>
    </div>
    ${
      shown.length === 0
        ? html`<p>No heal events${upstream === "" && action === "" ? " yet" : " match"}.</p>`
        : html`<ol class="events timeline" aria-label="Heal events, newest first">
            ${paged.rows.map((e) => html`<${HealItem} key=${e.id} event=${e} />`)}
          </ol>`
    }
    <${Pager} label="events" page=${paged.page} pages=${paged.pages} total=${shown.length}
      onPage=${setPage} />
  </section>`;
}
