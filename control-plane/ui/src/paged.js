import { html } from "htm/preact";

/** The slice of `items` on `page` (0-based), and how many pages there are. */
export function pageOf(items, page, size) {
  const pages = Math.max(1, Math.ceil(items.length / size));
  const at = Math.min(page, pages - 1);
  return { rows: items.slice(at * size, at * size + size), page: at, pages };
}

/**
 * Previous / next buttons for a long list: thousands of rows are shown a page at a time so the
 * page stays quick with hundreds of data planes and thousands of routes.
 */
export function Pager({ label, page, pages, total, onPage }) {
  if (pages <= 1) return html`<p class="count">${total} ${label}</p>`;
  return html`<nav class="pager" aria-label=${`${label} pages`}>
    <button type="button" disabled=${page === 0} onClick=${() => onPage(page - 1)}>
      Previous
    </button>
    <span aria-live="polite">Page ${page + 1} of ${pages} (${total} ${label})</span>
    <button type="button" disabled=${page >= pages - 1} onClick=${() => onPage(page + 1)}>
      Next
    </button>
  </nav>`;
}
