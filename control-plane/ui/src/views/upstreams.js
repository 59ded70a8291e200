import { html } from "htm/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { explain, getAllPages, getJson } from "../api.js";
import { ago, clock, matches } from "../format.js";
import { Pager, pageOf } from "../paged.js";
import { Loading } from "./fleet.js";
import { useLoad } from "./use-load.js";

const PAGE = 20;

/**
 * Each upstream's nodes as the data planes see them (healthy on n of m, majority verdict),
 * its breaker policy, the data planes whose breaker is open or half-open with their cooldowns,
 * and remediation cooldowns; a node's button opens its reports and heal events. Health is read
 * for the upstreams on the page only, and patched by verdict and breaker events.
 */
export function UpstreamsView({ token, bus, epoch }) {
  const [query, setQuery] = useState("");
  const [page, setPage] = useState(0);
  const [{ value, error }] = useLoad(
    async (signal) => {
      const [upstreams, breakers] = await Promise.all([
        getAllPages(token, "/v1/upstreams", signal),
        getAllPages(token, "/v1/breakers", signal),
      ]);
      return {
        upstreams,
        breakers: new Map(breakers.map((b) => [b.name, b])),
      };
    },
    [token, epoch],
  );
  const [health, setHealth] = useState(new Map());
  const [healthError, setHealthError] = useState("");
  const [healTick, setHealTick] = useState(0);

  const shown = (value?.upstreams ?? []).filter((u) => matches(u.name, query));
  const paged = pageOf(shown, page, PAGE);
  const names = paged.rows.map((u) => u.name);
  const visible = useRef(names);
  visible.current = names;

  const reload = async (list) => {
    try {
      const answers = await Promise.all(
        list.map((name) => getJson(token, `/v1/upstreams/${encodeURIComponent(name)}/health`)),
      );
      setHealth((old) => {
        const next = new Map(old);
        for (const answer of answers) next.set(answer.upstream, answer);
        return next;
      });
      setHealthError("");
    } catch (failure) {
      setHealthError(explain(failure));
    }
  };

  useEffect(() => {
    if (names.length > 0) reload(names);
  }, [names.join("\u0000"), epoch]);

  useEffect(() => {
    let timer;
    const offVerdict = bus.on("verdict", (summary) =>
      setHealth((old) => {
        const entry = old.get(summary.upstream);
        if (entry === undefined) return old;
        const { upstream: _u, ...node } = summary;
        const nodes = entry.nodes.map((n) =>
          n.address === node.address ? { ...node, remediation: n.remediation } : n,
        );
        if (!nodes.some((n) => n.address === node.address)) nodes.push(node);
        return new Map(old).set(summary.upstream, { ...entry, nodes });
      }),
    );
    // A data plane's report changed without moving a majority (one of three saw a node fail):
    // read the upstreams on the page again, at most a few times a second.
    const offHealth = bus.on("health", () => {
      clearTimeout(timer);
      timer = setTimeout(() => reload(visible.current), 300);
    });
    const offHeal = bus.on("heal", () => setHealTick((n) => n + 1));
    // A data plane's breaker of an upstream moved: patch that upstream's list in place.
    const offBreaker = bus.on("breaker", ({ upstream, ...breaker }) =>
      setHealth((old) => {
        const entry = old.get(upstream);
        if (entry === undefined) return old;
        const others = (entry.breakers ?? []).filter((b) => b.dataPlane !== breaker.dataPlane);
        const breakers =
          breaker.state === "closed"
            ? others
            : [...others, breaker].sort((a, b) => a.dataPlane.localeCompare(b.dataPlane));
        return new Map(old).set(upstream, { ...entry, breakers });
      }),
    );
    return () => {
      clearTimeout(timer);
      offVerdict();
      offHealth();
      offHeal();
      offBreaker();
    };
  }, [bus, token]);

  if (value === undefined) return html`<${Loading} error=${error} />`;
  return html`<section aria-labelledby="upstreams-title">
    <h2 id="upstreams-title">Upstreams</h2>
    ${error === "" ? null : html`<p class="error" role="alert">${error}</p>`}
    ${healthError === "" ? null : html`<p class="error" role="alert">${healthError}</p>`}
    <p class="hint">
      Breakers are per upstream and per data plane: each upstream lists those open or half-open,
      with their cooldowns, as the data planes report them.
    </p>
    <div class="filters">
      <label>Upstream <input type="search" value=${query}
        onInput=${(e) => {
          setQuery(e.currentTarget.value);
          setPage(0);
        }} /></label>
    </div>
    ${paged.rows.map(
      (u) => html`<${Upstream} key=${u.name} token=${token} upstream=${u}
        breaker=${value.breakers.get(u.spec.breaker)} health=${health.get(u.name)}
        healTick=${healTick} />`,
    )}
    <${Pager} label="upstreams" page=${paged.page} pages=${paged.pages} total=${shown.length}
      onPage=${setPage} />
  </section>`;
}

function Upstream({ token, upstream, breaker, health, healTick }) {
  const [open, setOpen] = useState("");
  const id = `upstream-${upstream.name}`;
  const policy = upstream.spec.breaker ?? "default";
  return html`<article class="upstream" aria-labelledby=${id} data-upstream=${upstream.name}>
    <h3 id=${id}>${upstream.name} <small>v${upstream.revision}</small></h3>
    <p class="meta">
      Breaker <strong>${policy}</strong>${
        breaker === undefined
          ? " (built in)"
          : `: opens after ${breaker.spec.consecutiveFailures} failures in a row, cooldown ${breaker.spec.cooldownMs} ms (up to ${breaker.spec.maxCooldownMs} ms)`
      }${health === undefined ? "" : `; reported by ${health.dataPlanes} data planes`}
    </p>
    <${Breakers} id=${`${id}-breakers`} upstream=${upstream.name} breakers=${health?.breakers} />
    <div class="scroll">
      <table>
        <caption class="sr-only">Nodes of ${upstream.name}</caption>
        <thead><tr>
          <th scope="col">Node</th><th scope="col">Verdict</th><th scope="col">Healthy on</th>
          <th scope="col">Quarantined</th><th scope="col">Evicted</th>
          <th scope="col">Remediation</th><th scope="col"><span class="sr-only">Details</span></th>
        </tr></thead>
        <tbody>
          ${(health?.nodes ?? []).map(
            (n) => html`<tr key=${n.address} data-node=${n.address} data-majority=${n.majority}>
              <th scope="row">${n.address}</th>
              <td><span class=${`badge ${n.majority}`}>${n.majority}</span></td>
              <td class="num">${n.healthy} of ${n.total}</td>
              <td class="num">${n.quarantined}</td>
              <td class="num">${n.evicted}</td>
              <td>${remediation(n.remediation)}</td>
              <td><button type="button" aria-expanded=${open === n.address}
                aria-controls=${`${id}-detail`}
                onClick=${() => setOpen(open === n.address ? "" : n.address)}>
                ${open === n.address ? "Hide" : "Heal events"}
                <span class="sr-only"> of ${n.address}</span></button></td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>
    ${
      open === ""
        ? null
        : html`<${NodeDetail} id=${`${id}-detail`} token=${token} upstream=${upstream.name}
            node=${health?.nodes.find((n) => n.address === open)} address=${open}
            healTick=${healTick} />`
    }
  </article>`;
}

/** The upstream's breakers that are not closed, one line per data plane. */
function Breakers({ id, upstream, breakers }) {
  if (breakers === undefined) return null;
  if (breakers.length === 0) {
    return html`<p class="breakers" data-breakers="closed">
      Breaker <span class="badge closed">closed</span> on every data plane</p>`;
  }
  return html`<div class="breakers" data-breakers="not-closed">
    <h4 id=${id}>Breakers not closed</h4>
    <ul aria-labelledby=${id}>
      ${breakers.map(
        (b) => html`<li key=${b.dataPlane} data-data-plane=${b.dataPlane} data-state=${b.state}>
          <strong>${b.dataPlane}</strong>: <span class=${`badge ${b.state}`}>${b.state.replace("_", "-")}</span>
          since <time datetime=${b.since}>${ago(b.since)}</time>${
            b.cooldownUntil === undefined
              ? ""
              : html`, cooldown until <time datetime=${b.cooldownUntil}>${clock(b.cooldownUntil)}</time>`
          }<span class="sr-only"> (${upstream})</span></li>`,
      )}
    </ul>
  </div>`;
}

function remediation(state) {
  if (state === undefined) return "none";
  const parts = [`${state.attempts} attempts`];
  if (state.running) parts.push("running");
  if (state.lastOutcome !== undefined) parts.push(`last ${state.lastOutcome}`);
  if (state.nextAttemptAt !== undefined) parts.push(`cooldown until ${clock(state.nextAttemptAt)}`);
  return parts.join(", ");
}

/** One node: each data plane's word on it, and its recent heal events with their evidence. */
function NodeDetail({ id, token, upstream, node, address, healTick }) {
  const [{ value, error }] = useLoad(
    async (signal) => {
      const body = await getJson(
        token,
        `/v1/events?upstream=${encodeURIComponent(upstream)}&limit=1000`,
        signal,
      );
      return body.items.filter((event) => event.node === address).slice(0, 50);
    },
    [token, upstream, address, healTick],
  );
  return html`<div class="detail" id=${id} role="region" aria-label=${`${address} details`}>
    <h4>${address} as each data plane sees it</h4>
    <ul>
      ${(node?.reports ?? []).map(
        (
          r,
        ) => html`<li><strong>${r.dataPlane}</strong>: <span class=${`badge ${r.state}`}>${r.state}</span>
          since <time datetime=${r.changedAt}>${ago(r.changedAt)}</time>${r.evidence === "" ? "" : ` — ${r.evidence}`}</li>`,
      )}
    </ul>
    <h4>Recent heal events</h4>
    ${error === "" ? null : html`<p class="error" role="alert">${error}</p>`}
    ${
      value === undefined
        ? null
        : value.length === 0
          ? html`<p>No heal events for this node.</p>`
          : html`<ol class="events">${value.map((e) => html`<${HealItem} key=${e.id} event=${e} />`)}</ol>`
    }
  </div>`;
}

export function HealItem({ event }) {
  return html`<li class="event" data-action=${event.action}>
    <time datetime=${event.time} title=${event.time}>${clock(event.time)}</time>
    <span class=${`badge ${event.action}`}>${event.action}</span>
    <span>${event.upstream}${event.node === undefined ? "" : ` / ${event.node}`}</span>
    ${event.outcome === undefined ? null : html`<span>outcome: ${event.outcome}</span>`}
    <span class="source">by ${event.source}${event.count === undefined ? "" : `, ${event.count} events`}</span>
    ${event.evidence === undefined ? null : html`<p class="evidence">${event.evidence}</p>`}
  </li>`;
}
