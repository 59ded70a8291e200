/*
 * RFC 9112 section 6.1: a server that receives a transfer coding it does not understand should
 * answer 501. node:http's parser refuses a Transfer-Encoding whose last coding is not chunked,
 * but passes "gzip, chunked", and the hop-by-hop filter then drops the header: the upstream got
 * a plain chunked body the client had gzipped (review 20c, Low 10). Only chunked is understood.
 */

/**
 * True when a request's Transfer-Encoding names a coding other than chunked. The usual
 * "chunked" (any case) is settled with a few character reads and no allocation.
 */
export function unsupportedTransferCoding(value: string | undefined): boolean {
  if (value === undefined || isChunked(value, 0, value.length)) return false;
  // Several field lines reach here joined by ", "; spaces around each coding are allowed.
  let start = 0;
  for (;;) {
    let end = value.indexOf(",", start);
    if (end < 0) end = value.length;
    let from = start;
    let to = end;
    while (from < to && isSpace(value.charCodeAt(from))) from++;
    while (to > from && isSpace(value.charCodeAt(to - 1))) to--;
    if (!isChunked(value, from, to)) return true;
    if (end === value.length) return false;
    start = end + 1;
  }
}

const CHUNKED = "chunked";

/** value[from, to) is "chunked" in any case; ORing 0x20 folds A-Z to a-z. */
function isChunked(value: string, from: number, to: number): boolean {
  if (to - from !== CHUNKED.length) return false;
  for (let i = 0; i < CHUNKED.length; i++) {
    if ((value.charCodeAt(from + i) | 0x20) !== CHUNKED.charCodeAt(i)) return false;
  }
  return true;
}

function isSpace(code: number): boolean {
  return code === 32 || code === 9;
}
