/** "12 s ago" style times: an SRE reads recency faster than a timestamp. */
export function ago(iso, now = Date.now()) {
  const ms = now - Date.parse(iso);
  if (Number.isNaN(ms)) return "";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${Math.max(s, 0)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86_400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86_400)} d ago`;
}

/** Local time, to the second, with the ISO value for a tooltip. */
export function clock(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

/** Case-insensitive "contains" for the filter boxes. */
export function matches(text, query) {
  return query === "" || String(text).toLowerCase().includes(query.toLowerCase());
}
