import { html } from "htm/preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { explain, getJson } from "./api.js";
import { createBus } from "./bus.js";
import { followLive } from "./live.js";
import { forgetToken, initialToken, keepToken } from "./token.js";
import { ConfigView } from "./views/config.js";
import { FleetView } from "./views/fleet.js";
import { JournalView } from "./views/journal.js";
import { UpstreamsView } from "./views/upstreams.js";

const VIEWS = [
  { id: "fleet", label: "Fleet", View: FleetView },
  { id: "upstreams", label: "Upstreams", View: UpstreamsView },
  { id: "journal", label: "Journal", View: JournalView },
  { id: "config", label: "Config", View: ConfigView },
];

/** Asks for the token until the control plane accepts one, then shows the console. */
export function App() {
  const [token, setToken] = useState(initialToken);
  const [accepted, setAccepted] = useState(false);
  const [error, setError] = useState("");

  useEffect(() => {
    if (token === "" || accepted) return;
    let stale = false;
    // Any read a viewer may make proves the token before the views start.
    getJson(token, "/v1/snapshot")
      .then(() => {
        if (stale) return;
        keepToken(token);
        setAccepted(true);
        setError("");
      })
      .catch((failure) => {
        if (stale) return;
        forgetToken();
        setToken("");
        setError(explain(failure));
      });
    return () => {
      stale = true;
    };
  }, [token, accepted]);

  const signOut = (why = "") => {
    forgetToken();
    setAccepted(false);
    setToken("");
    setError(why);
  };

  if (!accepted) {
    return html`<${SignIn} checking=${token !== ""} error=${error} onToken=${setToken} />`;
  }
  return html`<${Console} token=${token} onSignOut=${signOut} />`;
}

function SignIn({ checking, error, onToken }) {
  const submit = (event) => {
    event.preventDefault();
    const value = new FormData(event.currentTarget).get("token")?.toString().trim() ?? "";
    if (value !== "") onToken(value);
  };
  return html`<main class="signin">
    <h1>Clawgate console</h1>
    <form onSubmit=${submit}>
      <label for="token">Admin API token</label>
      <input id="token" name="token" type="password" autocomplete="off" required autofocus />
      <p class="hint">A viewer token is enough. It is kept in this tab only (sessionStorage).</p>
      <button type="submit" disabled=${checking}>${checking ? "Checking…" : "Open console"}</button>
      ${error === "" ? null : html`<p class="error" role="alert" id="signin-error">${error}</p>`}
    </form>
  </main>`;
}

const LIVE_TEXT = {
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Reconnecting…",
  refused: "Live updates refused",
};

function Console({ token, onSignOut }) {
  const bus = useMemo(createBus, []);
  const [view, setView] = useState(() => {
    const wanted = window.location.hash.replace(/^#/, "");
    return VIEWS.some((v) => v.id === wanted) ? wanted : "fleet";
  });
  const [live, setLive] = useState("connecting");
  // Bumped on each (re)connect: views reload, since events sent while away are lost.
  const [epoch, setEpoch] = useState(0);

  useEffect(
    () =>
      followLive(
        token,
        (type, data) => bus.emit(type, data),
        (state, detail) => {
          setLive(state);
          if (state === "live") setEpoch((n) => n + 1);
          if (state === "refused" && detail?.status === 401) onSignOut(explain(detail));
        },
      ),
    [token],
  );

  const choose = (id) => {
    setView(id);
    window.history.replaceState(null, "", `#${id}`);
  };
  const onTabKey = (event) => {
    const at = VIEWS.findIndex((v) => v.id === view);
    const step = event.key === "ArrowRight" ? 1 : event.key === "ArrowLeft" ? -1 : 0;
    if (step === 0) return;
    const next = VIEWS[(at + step + VIEWS.length) % VIEWS.length];
    choose(next.id);
    document.getElementById(`tab-${next.id}`)?.focus();
  };
  const current = VIEWS.find((v) => v.id === view);

  return html`<div class="console">
    <header>
      <h1>Clawgate</h1>
      <div role="tablist" aria-label="Views" onKeyDown=${onTabKey}>
        ${VIEWS.map(
          (v) => html`<button
            type="button"
            role="tab"
            id=${`tab-${v.id}`}
            aria-selected=${v.id === view}
            aria-controls="view"
            tabindex=${v.id === view ? 0 : -1}
            onClick=${() => choose(v.id)}
          >
            ${v.label}
          </button>`,
        )}
      </div>
      <p class="live" data-state=${live} role="status">${LIVE_TEXT[live]}</p>
      <button type="button" class="signout" onClick=${() => onSignOut("")}>Sign out</button>
    </header>
    <main id="view" role="tabpanel" aria-labelledby=${`tab-${view}`}>
      <${current.View} token=${token} bus=${bus} epoch=${epoch} />
    </main>
  </div>`;
}
