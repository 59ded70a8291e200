/** Where the Swagger UI, its assets and the OpenAPI document (`/docs/json`) are served. */
export const DOCS_PREFIX = "/docs";

/** The console page; it asks for the token and sends it on every API call it makes. */
export const UI_PREFIX = "/ui";

/** Probes carry no token: a kubelet or systemd check must reach them. */
const PROBE_ROUTES = new Set(["/healthz", "/readyz"]);

/**
 * True for the routes anyone may call: the probes and the API's documentation. The docs page
 * is opened in a browser, which sends no bearer token, and the document only describes the API;
 * every operation it lists still needs the token. The console's static files are public for the
 * same reason: the page holds no data until the user gives it a token. Judged by the matched route's pattern, not the
 * raw URL, so no spelling of a path can reach an API route through this exemption.
 */
export function isPublicRoute(routeUrl: string | undefined): boolean {
  if (routeUrl === undefined) return false;
  return (
    PROBE_ROUTES.has(routeUrl) ||
    routeUrl === DOCS_PREFIX ||
    routeUrl.startsWith(`${DOCS_PREFIX}/`) ||
    routeUrl === UI_PREFIX ||
    routeUrl.startsWith(`${UI_PREFIX}/`)
  );
}
