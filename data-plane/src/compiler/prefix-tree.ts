/*
 * A trie over path segments ("/api/v1/x" is api, v1, x) holding route path prefixes and exact
 * paths, so that one walk down a request path finds both, at one lookup per segment of the path
 * whatever the number of routes. A tree on characters did the same in principle, but its depth
 * grew with the routes (10,000 routes named /svc-0 ... /svc-9999 put four single-digit levels
 * under "/svc-" where 10 routes put one); with segments, /api/v0/svc-1234/items walks four
 * levels at either size.
 *
 * Layout, for the CPU caches: at 10,000 routes a match that chased a node object, its children
 * Map (bucket, then entry), its segment string and the value's list missed the cache at each
 * step, and cost 1.5 to 1.9 times a match at 10 routes, where everything stays cached. Here the
 * whole tree is one open-addressing hash table in an Int32Array: a node IS its slot, found by
 * hashing (parent slot, segment hash), and the slot holds all a walk reads of it (its segment's
 * place in a shared character pool, its value indexes, its child count), so a step is one
 * probe, usually within one cache line. A request path is never split into strings: each
 * segment is hashed in place (FNV-1a over its UTF-16 code units) and then compared with the
 * pool's characters, so segments whose hashes collide cost a comparison, never a wrong match.
 *
 * The segment-boundary rule of route-table.ts lives here: a prefix that does not end in "/"
 * ("/api") holds only when the path ends right after it or continues with "/" ("/api",
 * "/api/x", not "/apix"), which a segment walk gives for free; a prefix ending in "/" ("/",
 * "/api/") holds for every path that starts with it. The latter is kept in its parent's node
 * ("/api" for "/api/", the root for "/") as `open`, and holds when the path goes on with "/".
 * An exact path is kept at the node of all its segments ("/a/" is a, then an empty one) and
 * holds when the walk ends there or one "/" later ("/a" holds for "/a" and "/a/"; the route
 * table keys "/a/" as "/a", so it holds for both too). A match tries the deepest node first, where an exact
 * path comes before the prefix of the same length, and falls back to shorter prefixes on the
 * way up (at each node `open`, one character longer, before the prefix itself), so "exact
 * first, then the longer prefix" needs no sorting at match time. Keys must be "" or start with
 * "/" (route paths always do).
 *
 * The tree is immutable. with() copies the pages of the table it writes (16 KiB each, a few
 * per changed path) and the list of values, and changes the copies; the other pages are shared,
 * so a one-route delta costs tens of microseconds at 10,000 routes, never a rebuild.
 */

/** Where a key sits in its node: a prefix, a prefix followed by "/", or an exact path. */
export type PathKind = "prefix" | "exact";

/** One change for PrefixTree.withAll: set `value` at `path` (undefined removes it). */
export interface PathChange<T> {
  readonly kind: PathKind;
  readonly path: string;
  readonly value: T | undefined;
}

// A slot's fields, STRIDE Int32 apart. A slot whose PARENT is 0 is empty.
/** The parent's slot + 2; 1 for the root. */
const PARENT = 0;
/** The segment's hash. */
const HASH = 1;
/** Where the segment's characters start in the pool, and how many there are. */
const START = 2;
const LENGTH = 3;
/** Index + 1 in the values array of the prefix, the prefix with "/", the exact path; 0: none. */
const VALUE = 4;
const OPEN = 5;
const EXACT = 6;
/** How many children the node has: a walk does not probe under a node that has none. */
const CHILDREN = 7;
const STRIDE = 8;
const ROOT_PARENT = -1;
/**
 * The table is cut in pages of PAGE slots (16 KiB), so that a copy for a delta copies only the
 * pages it writes (a few), not the whole table (half a megabyte for 7,000 paths, most of it
 * fresh memory the kernel must fault in: milliseconds where a page costs microseconds).
 */
const PAGE_BITS = 9;
const PAGE = 1 << PAGE_BITS;
const IN_PAGE = PAGE - 1;

const SLASH = 47;
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
const MIN_SLOTS = 8;

/** The arrays of a tree; a Builder changes its own copies of them. */
interface Arrays<T> {
  /** The slot table, PAGE slots per page (one smaller page for a table of fewer slots). */
  pages: Int32Array[];
  /** Slots in the table: a power of two. */
  count: number;
  /** Which pages these arrays may write: those they made or copied (see writable()). */
  owned: Uint8Array;
  /** 32 - log2(slot count): a slot index is the top bits of a 32-bit mix. */
  shift: number;
  chars: Uint16Array;
  charsUsed: number;
  values: (T | undefined)[];
  /** Slots in use. */
  nodes: number;
  root: number;
  prefixes: number;
  exacts: number;
  /** Keys set or removed by withAll since the tree was built. */
  changes: number;
}

export class PrefixTree<T> {
  readonly #pages: readonly Int32Array[];
  readonly #shift: number;
  readonly #mask: number;
  readonly #chars: Uint16Array;
  readonly #values: readonly (T | undefined)[];
  readonly #root: number;
  readonly #arrays: Readonly<Arrays<T>>;
  /** Prefixes holding a value. */
  readonly size: number;
  /** Exact paths holding a value. */
  readonly exactSize: number;
  /**
   * Keys set or removed by with() and withAll() since build(): removed keys may leave empty
   * nodes behind, so an owner rebuilds the tree once this passes its size.
   */
  readonly changes: number;

  private constructor(arrays: Arrays<T>) {
    this.#arrays = arrays;
    this.#pages = arrays.pages;
    this.#shift = arrays.shift;
    this.#mask = arrays.count - 1;
    this.#chars = arrays.chars;
    this.#values = arrays.values;
    this.#root = arrays.root;
    this.size = arrays.prefixes;
    this.exactSize = arrays.exacts;
    this.changes = arrays.changes;
    Object.freeze(this);
  }

  /** Builds the tree of `prefixes` and `exact` paths (key, value); a key may appear once each. */
  static build<T>(
    prefixes: Iterable<readonly [string, T]>,
    exact: Iterable<readonly [string, T]> = [],
  ): PrefixTree<T> {
    const steps = PrefixTree.buildSteps(prefixes, exact);
    for (;;) {
      const step = steps.next();
      if (step.done) return step.value;
    }
  }

  /**
   * `build` with a `yield` after every `every` keys put in (a point where a caller may hand
   * the event loop back); the tree exists only once it returns.
   */
  static *buildSteps<T>(
    prefixes: Iterable<readonly [string, T]>,
    exact: Iterable<readonly [string, T]> = [],
    every = Number.POSITIVE_INFINITY,
  ): Generator<void, PrefixTree<T>> {
    const entries: PathChange<T>[] = [];
    let count = 0;
    // The iterables may make their values as they go (route-table.ts's candidates): in steps too.
    for (const [path, value] of prefixes) {
      entries.push({ kind: "prefix", path, value });
      if (++count % every === 0) yield;
    }
    for (const [path, value] of exact) {
      entries.push({ kind: "exact", path, value });
      if (++count % every === 0) yield;
    }
    // The table is made at the size of the nodes the keys make (their distinct leading paths,
    // counted in steps too): sized for every segment of every key it was up to four times too
    // big, as shared leading segments ("/api/v1" under thousands of routes) make far fewer
    // nodes, and fitting it afterwards moved every node in one step, the longest of a boot.
    const nodePaths = new Set<string>();
    let chars = 0;
    for (const { kind, path } of entries) {
      checkKey(path);
      const end = kind === "prefix" && isOpen(path) ? path.length - 1 : path.length;
      for (let at = 0; at < end; ) {
        const stop = segmentEnd(path, at + 1, end);
        nodePaths.add(path.slice(0, stop));
        at = stop;
      }
      chars += path.length;
      if (++count % every === 0) yield;
    }
    const builder = new Builder<T>(emptyArrays<T>(nodePaths.size + 1, chars), true);
    nodePaths.clear();
    for (const entry of entries) {
      if (builder.set(entry.kind, entry.path, entry.value, true)) {
        throw new Error(`${entry.kind} ${entry.path} inserted twice`);
      }
      if (++count % every === 0) yield;
    }
    return new PrefixTree(builder.arrays);
  }

  /** The value stored at exactly `prefix`, if any. */
  get(prefix: string): T | undefined {
    return this.#get("prefix", prefix);
  }

  /** The value stored for the exact path `path`, if any. */
  getExact(path: string): T | undefined {
    return this.#get("exact", path);
  }

  /** A new tree with `prefix` set to `value` (undefined removes it); this one is unchanged. */
  with(prefix: string, value: T | undefined): PrefixTree<T> {
    return this.withAll([{ kind: "prefix", path: prefix, value }]);
  }

  /**
   * A new tree with every change made; this one is unchanged. The arrays are copied once for
   * all the changes. A removed key may leave an empty node behind, which a match passes
   * through (see `changes`).
   */
  withAll(changes: Iterable<PathChange<T>>): PrefixTree<T> {
    let builder: Builder<T> | undefined;
    for (const { kind, path, value } of changes) {
      if (value === undefined && this.#get(kind, path) === undefined && builder === undefined) {
        continue;
      }
      checkKey(path);
      builder ??= new Builder<T>(copyArrays(this.#arrays), false);
      builder.set(kind, path, value, false);
      builder.arrays.changes += 1;
    }
    return builder === undefined ? this : new PrefixTree(builder.arrays);
  }

  /** Every value in the tree. */
  *values(): Generator<T> {
    for (const value of this.#values) if (value !== undefined) yield value;
  }

  /**
   * Walks what holds for `path`, deepest first: the exact path, then its prefixes (boundary
   * rule included), longest first; returns the first result of `visit` that is not undefined.
   * Allocates nothing itself.
   */
  find<R, A, B>(
    path: string,
    visit: (value: T, a: A, b: B) => R | undefined,
    a: A,
    b: B,
  ): R | undefined {
    return this.#findFrom(this.#root, path, 0, visit, a, b);
  }

  // Recursion keeps the chain of matched nodes on the call stack: deeper nodes are tried first
  // and shorter prefixes on the way back, without building a list. Depth is bounded by the
  // number of segments of the path. `end` is where this node's key ends in `path`: at its end
  // or on a "/" (or, at the root, on whatever the path starts with).
  #findFrom<R, A, B>(
    node: number,
    path: string,
    end: number,
    visit: (value: T, a: A, b: B) => R | undefined,
    a: A,
    b: B,
  ): R | undefined {
    const slots = this.#pages[node >>> PAGE_BITS] as Int32Array;
    const at = (node & IN_PAGE) * STRIDE;
    const slash = end < path.length && path.charCodeAt(end) === SLASH;
    if (slash && slots[at + CHILDREN] !== 0) {
      const stop = segmentEnd(path, end + 1, path.length);
      const child = this.#childOf(node, path, end + 1, stop);
      if (child >= 0) {
        const found = this.#findFrom(child, path, stop, visit, a, b);
        if (found !== undefined) return found;
      }
    }
    // An exact path holds for the path and for it with one "/" more (route-table.ts).
    if (end === path.length || (slash && end === path.length - 1)) {
      const exact = slots[at + EXACT] as number;
      if (exact !== 0) {
        const found = visit(this.#values[exact - 1] as T, a, b);
        if (found !== undefined) return found;
      }
    }
    if (slash) {
      const open = slots[at + OPEN] as number;
      if (open !== 0) {
        const found = visit(this.#values[open - 1] as T, a, b);
        if (found !== undefined) return found;
      }
    }
    const value = slots[at + VALUE] as number;
    if (value === 0 || !(slash || end === path.length)) return undefined;
    return visit(this.#values[value - 1] as T, a, b);
  }

  #get(kind: PathKind, key: string): T | undefined {
    const open = kind === "prefix" && isOpen(key);
    const end = open ? key.length - 1 : key.length;
    if (end > 0 && key.charCodeAt(0) !== SLASH) return undefined;
    let node = this.#root;
    // Each turn stands on the "/" that opens the next segment.
    for (let at = 0; at < end && node >= 0; ) {
      const stop = segmentEnd(key, at + 1, end);
      node = this.#childOf(node, key, at + 1, stop);
      at = stop;
    }
    if (node < 0) return undefined;
    const page = this.#pages[node >>> PAGE_BITS] as Int32Array;
    const index =
      page[(node & IN_PAGE) * STRIDE + (open ? OPEN : kind === "exact" ? EXACT : VALUE)];
    return index === 0 ? undefined : this.#values[(index as number) - 1];
  }

  /** The slot of the child of `parent` whose segment is text[from, to), or -1. */
  #childOf(parent: number, text: string, from: number, to: number): number {
    return probe(this.#pages, this.#shift, this.#mask, this.#chars, parent, text, from, to);
  }
}

/** Changes a private copy of a tree's arrays; `arrays` is the result once done. */
class Builder<T> {
  readonly arrays: Arrays<T>;
  /** The character pool is this builder's own (not shared with a tree) and may be written. */
  #ownChars: boolean;
  /** One place in the pool per distinct segment while building: "status" is stored once. */
  readonly #pooled = new Map<string, number>();

  constructor(arrays: Arrays<T>, ownChars: boolean) {
    this.arrays = arrays;
    this.#ownChars = ownChars;
  }

  /** Sets `value` at the key; answers whether the key held a value before. */
  set(kind: PathKind, key: string, value: T | undefined, pool: boolean): boolean {
    const open = kind === "prefix" && isOpen(key);
    const end = open ? key.length - 1 : key.length;
    let node = this.arrays.root;
    for (let at = 0; at < end; ) {
      const stop = segmentEnd(key, at + 1, end);
      // Removing a key that is not there must not make the nodes of its path.
      node =
        value === undefined
          ? probeIn(this.arrays, node, key, at + 1, stop)
          : this.#child(node, key, at + 1, stop, pool);
      if (node < 0) return false;
      at = stop;
    }
    const field = (node & IN_PAGE) * STRIDE + (open ? OPEN : kind === "exact" ? EXACT : VALUE);
    const { values } = this.arrays;
    const slots = writable(this.arrays, node);
    const index = slots[field] as number;
    const had = index !== 0;
    if (index !== 0) {
      // A removed key's field goes back to 0, so a walk never reads an empty value.
      values[index - 1] = value;
      if (value === undefined) slots[field] = 0;
    } else if (value !== undefined) {
      values.push(value);
      slots[field] = values.length;
    }
    const delta = (value === undefined ? 0 : 1) - (had ? 1 : 0);
    if (kind === "exact") this.arrays.exacts += delta;
    else this.arrays.prefixes += delta;
    return had;
  }

  /** The child of `parent` for text[from, to), made if missing. */
  #child(parent: number, text: string, from: number, to: number, pool: boolean): number {
    const a = this.arrays;
    const found = probeIn(a, parent, text, from, to);
    if (found >= 0) return found;
    if ((a.nodes + 1) * 2 > a.count) {
      const moved = resize(a, a.count * 2);
      parent = moved[parent] as number;
    }
    const start = this.#store(text, from, to, pool);
    const slot = place(a, parent, hashOf(text, from, to), start, to - from);
    const page = writable(a, parent);
    const children = (parent & IN_PAGE) * STRIDE + CHILDREN;
    page[children] = (page[children] as number) + 1;
    return slot;
  }

  /** Where text[from, to) sits in the character pool, appended if not there yet. */
  #store(text: string, from: number, to: number, pool: boolean): number {
    const segment = pool ? text.slice(from, to) : "";
    if (pool) {
      const known = this.#pooled.get(segment);
      if (known !== undefined) return known;
    }
    const a = this.arrays;
    if (!this.#ownChars || a.charsUsed + (to - from) > a.chars.length) {
      const chars = new Uint16Array(Math.max(16, (a.charsUsed + (to - from)) * 2));
      chars.set(a.chars.subarray(0, a.charsUsed));
      a.chars = chars;
      this.#ownChars = true;
    }
    const start = a.charsUsed;
    for (let i = from; i < to; i++) a.chars[start + i - from] = text.charCodeAt(i);
    a.charsUsed += to - from;
    if (pool) this.#pooled.set(segment, start);
    return start;
  }
}

/** Slots for `nodes` nodes: a power of two, at most half full, so probes stay short. */
function slotsFor(nodes: number): number {
  let count = MIN_SLOTS;
  while (count < nodes * 2) count *= 2;
  return count;
}

function emptyArrays<T>(nodes: number, chars: number): Arrays<T> {
  const count = slotsFor(nodes);
  const arrays: Arrays<T> = {
    pages: newPages(count),
    count,
    owned: new Uint8Array(Math.max(1, count / PAGE)).fill(1),
    shift: 32 - Math.log2(count),
    chars: new Uint16Array(Math.max(16, chars)),
    charsUsed: 0,
    values: [],
    nodes: 0,
    root: 0,
    prefixes: 0,
    exacts: 0,
    changes: 0,
  };
  arrays.root = place(arrays, ROOT_PARENT, 0, 0, 0);
  return arrays;
}

function copyArrays<T>(arrays: Readonly<Arrays<T>>): Arrays<T> {
  // The pool is shared until the copy appends to it (Builder.#store copies it then).
  // Pages are shared too until written (writable() copies a page then); `owned` is the copy's.
  return {
    ...arrays,
    pages: arrays.pages.slice(),
    owned: new Uint8Array(arrays.pages.length),
    values: arrays.values.slice(),
  };
}

/** Puts a new node in a free slot of `arrays` (which has room) and answers the slot. */
function place<T>(
  arrays: Arrays<T>,
  parent: number,
  hash: number,
  start: number,
  length: number,
): number {
  const { pages, shift } = arrays;
  const mask = arrays.count - 1;
  let slot = slotOf(parent, hash, shift);
  while ((pages[slot >>> PAGE_BITS] as Int32Array)[(slot & IN_PAGE) * STRIDE + PARENT] !== 0) {
    slot = (slot + 1) & mask;
  }
  const slots = writable(arrays, slot);
  const at = (slot & IN_PAGE) * STRIDE;
  slots[at + PARENT] = parent + 2;
  slots[at + HASH] = hash;
  slots[at + START] = start;
  slots[at + LENGTH] = length;
  arrays.nodes += 1;
  return slot;
}

/**
 * Moves every node into a table of `count` slots (room for them all). A node is its slot, so
 * its children's PARENT moves with it: nodes are placed parents first. Answers each old slot's
 * new one.
 */
function resize<T>(arrays: Arrays<T>, count: number): Int32Array {
  const old = arrays.pages;
  const oldCount = arrays.count;
  const moved = new Int32Array(oldCount).fill(-1);
  arrays.pages = newPages(count);
  arrays.owned = new Uint8Array(arrays.pages.length).fill(1);
  arrays.count = count;
  arrays.shift = 32 - Math.log2(count);
  arrays.nodes = 0;
  const move = (slot: number): number => {
    const known = moved[slot] as number;
    if (known >= 0) return known;
    const from = old[slot >>> PAGE_BITS] as Int32Array;
    const at = (slot & IN_PAGE) * STRIDE;
    const parent = (from[at + PARENT] as number) - 2;
    const newParent = parent === ROOT_PARENT ? ROOT_PARENT : move(parent);
    const placed = place(
      arrays,
      newParent,
      from[at + HASH] as number,
      from[at + START] as number,
      from[at + LENGTH] as number,
    );
    const page = arrays.pages[placed >>> PAGE_BITS] as Int32Array;
    const to = (placed & IN_PAGE) * STRIDE;
    for (const field of [VALUE, OPEN, EXACT, CHILDREN])
      page[to + field] = from[at + field] as number;
    moved[slot] = placed;
    return placed;
  };
  for (let slot = 0; slot < oldCount; slot++) {
    const page = old[slot >>> PAGE_BITS] as Int32Array;
    if (page[(slot & IN_PAGE) * STRIDE + PARENT] !== 0) move(slot);
  }
  arrays.root = moved[arrays.root] as number;
  return moved;
}

/** A table of `count` slots, all empty. */
function newPages(count: number): Int32Array[] {
  const size = Math.min(count, PAGE);
  return Array.from({ length: count / size }, () => new Int32Array(size * STRIDE));
}

/** The page holding `slot`, made the arrays' own (copied once) so that it may be written. */
function writable<T>(arrays: Arrays<T>, slot: number): Int32Array {
  const index = slot >>> PAGE_BITS;
  if (arrays.owned[index] === 0) {
    arrays.pages[index] = (arrays.pages[index] as Int32Array).slice();
    arrays.owned[index] = 1;
  }
  return arrays.pages[index] as Int32Array;
}

/** The slot of the child of `parent` whose segment is text[from, to), or -1. */
function probe(
  pages: readonly Int32Array[],
  shift: number,
  mask: number,
  chars: Uint16Array,
  parent: number,
  text: string,
  from: number,
  to: number,
): number {
  const hash = hashOf(text, from, to);
  const length = to - from;
  for (let slot = slotOf(parent, hash, shift); ; slot = (slot + 1) & mask) {
    const slots = pages[slot >>> PAGE_BITS] as Int32Array;
    const at = (slot & IN_PAGE) * STRIDE;
    const owner = slots[at + PARENT] as number;
    if (owner === 0) return -1;
    if (owner === parent + 2 && slots[at + HASH] === hash && slots[at + LENGTH] === length) {
      const start = slots[at + START] as number;
      let i = 0;
      while (i < length && chars[start + i] === text.charCodeAt(from + i)) i++;
      if (i === length) return slot;
    }
  }
}

function probeIn<T>(
  arrays: Arrays<T>,
  parent: number,
  text: string,
  from: number,
  to: number,
): number {
  return probe(arrays.pages, arrays.shift, arrays.count - 1, arrays.chars, parent, text, from, to);
}

/** The home slot of (parent, hash): the top bits of a multiplicative mix of the two. */
function slotOf(parent: number, hash: number, shift: number): number {
  return Math.imul(hash ^ Math.imul(parent + 2, 0x9e3779b1), 0x85ebca6b) >>> shift;
}

/** Where the segment starting at `from` ends: the next "/" before `limit`, else `limit`. */
function segmentEnd(text: string, from: number, limit: number): number {
  const slash = text.indexOf("/", from);
  return slash < 0 || slash > limit ? limit : slash;
}

/** FNV-1a of text[from, to), kept to 30 bits so that it stays a small integer in V8. */
function hashOf(text: string, from: number, to: number): number {
  let hash = FNV_OFFSET;
  for (let i = from; i < to; i++) hash = Math.imul(hash ^ text.charCodeAt(i), FNV_PRIME);
  return hash >>> 2;
}

/** A prefix ending in "/" (but not "" itself) lives in the `open` field of its parent's node. */
function isOpen(prefix: string): boolean {
  return prefix.length > 0 && prefix.charCodeAt(prefix.length - 1) === SLASH;
}

function checkKey(key: string): void {
  if (key.length > 0 && key.charCodeAt(0) !== SLASH) {
    throw new Error(`prefix ${JSON.stringify(key)} does not start with "/"`);
  }
}
