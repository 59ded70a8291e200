/*
 * A trie over path segments ("/api/v1/x" is api, v1, x) holding route path prefixes, so
 * finding the prefixes of a request path costs one lookup per segment of the path, whatever
 * the number of routes. A tree on characters did the same in principle, but its depth grew
 * with the routes: 10,000 routes named /svc-0 ... /svc-9999 put four single-digit levels under
 * "/svc-" where 10 routes put one, and a match at 10,000 routes cost 1.8x one at 10. With
 * segments, /api/v0/svc-1234/items walks four levels at either size.
 *
 * A request path is never split into strings: each segment is hashed in place (FNV-1a over
 * its UTF-16 code units) and children are found in a Map keyed by that small integer, then
 * the segment's characters are compared to confirm it. Segments whose hashes collide share a
 * Map entry as a chain (`sibling`), so a collision costs a comparison, never a wrong match.
 *
 * The segment-boundary rule of route-table.ts lives here: a prefix that does not end in "/"
 * ("/api") holds only when the path ends right after it or continues with "/" ("/api",
 * "/api/x", not "/apix"), which a segment walk gives for free; a prefix ending in "/" ("/",
 * "/api/") holds for every path that starts with it. The latter is kept in its parent's node
 * ("/api" for "/api/", the root for "/") as `open`, and holds when the path goes on with "/".
 * A match tries the deepest node first and falls back to shorter prefixes on the way up
 * (at each node `open`, one character longer, before `value`), so "longer prefix first" needs
 * no sorting at match time. Keys must be "" or start with "/" (route paths always do).
 */

/**
 * One node: the prefix "/s1/.../sn" made of the segments on the way down from the root. A class,
 * so that every node (built or copied by with()) has one hidden class and the walk's property
 * reads stay monomorphic.
 */
class Node<T> {
  /** The last segment of this node's prefix (empty at the root, or for "//"). */
  readonly segment: string;
  /** Its hash, the key of this node in its parent's children. */
  readonly hash: number;
  /**
   * The child when there is exactly one (most nodes: "/exact/42/status" has one "status"), so
   * a walk through it reads no Map; `children` is then undefined.
   */
  only: Node<T> | undefined = undefined;
  /** Children keyed by their segment's hash, once there are two or more. */
  children: Map<number, Node<T>> | undefined = undefined;
  /** The next child of the same parent whose segment has the same hash. */
  sibling: Node<T> | undefined = undefined;
  /** The value of this node's prefix itself ("/api"). */
  value: T | undefined = undefined;
  /** The value of this node's prefix followed by "/" ("/api/"). */
  open: T | undefined = undefined;

  constructor(segment: string, hash: number) {
    this.segment = segment;
    this.hash = hash;
  }

  /** A copy with its own children map (the children themselves shared) and `sibling`. */
  copy(sibling: Node<T> | undefined = this.sibling): Node<T> {
    const copy = new Node<T>(this.segment, this.hash);
    copy.only = this.only;
    copy.children = this.children === undefined ? undefined : new Map(this.children);
    copy.sibling = sibling;
    copy.value = this.value;
    copy.open = this.open;
    return copy;
  }
}

const SLASH = 47;
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

export class PrefixTree<T> {
  readonly #root: Node<T>;
  /** Prefixes holding a value. */
  readonly size: number;

  private constructor(root: Node<T>, size: number) {
    this.#root = root;
    this.size = size;
    Object.freeze(this);
  }

  /** Builds the tree of `entries` (prefix, value); a prefix may appear once. */
  static build<T>(entries: Iterable<readonly [string, T]>): PrefixTree<T> {
    const root = new Node<T>("", 0);
    // One string per distinct segment: 3,000 nodes "status" then share one, which stays in
    // the CPU cache instead of being 3,000 strings that each miss it.
    const segments = new Map<string, string>();
    let size = 0;
    for (const [prefix, value] of entries) {
      const node = nodeFor(root, prefix, false, segments);
      if (isOpen(prefix) ? node.open !== undefined : node.value !== undefined) {
        throw new Error(`prefix ${prefix} inserted twice`);
      }
      setSlot(node, prefix, value);
      size += 1;
    }
    return new PrefixTree(root, size);
  }

  /** The value stored at exactly `prefix`, if any. */
  get(prefix: string): T | undefined {
    const end = isOpen(prefix) ? prefix.length - 1 : prefix.length;
    if (end > 0 && prefix.charCodeAt(0) !== SLASH) return undefined;
    let node: Node<T> | undefined = this.#root;
    // Each turn stands on the "/" that opens the next segment.
    for (let at = 0; at < end && node !== undefined; ) {
      const stop = segmentEnd(prefix, at + 1, end);
      node = childOf(node, prefix, at + 1, stop);
      at = stop;
    }
    if (node === undefined) return undefined;
    return isOpen(prefix) ? node.open : node.value;
  }

  /**
   * A new tree with `prefix` set to `value` (undefined removes it); this one is unchanged. Only
   * the nodes on the prefix's path are copied (the rest is shared), so a change costs the depth
   * of one path, not the size of the tree: a one-route delta does not rebuild 10,000 prefixes.
   * A removed prefix may leave an empty node behind, which a match passes through; the route
   * table rebuilds a tier whole when it has changed as many times as it has prefixes.
   */
  with(prefix: string, value: T | undefined): PrefixTree<T> {
    const had = this.get(prefix) !== undefined;
    if (value === undefined && !had) return this;
    const root = this.#root.copy();
    setSlot(nodeFor(root, prefix, true), prefix, value);
    const size = this.size + (value === undefined ? -1 : had ? 0 : 1);
    return new PrefixTree(root, size);
  }

  /** Every value in the tree. */
  *values(): Generator<T> {
    const stack: Node<T>[] = [this.#root];
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      if (node.value !== undefined) yield node.value;
      if (node.open !== undefined) yield node.open;
      if (node.only !== undefined) stack.push(node.only);
      for (const head of node.children?.values() ?? []) {
        for (let child: Node<T> | undefined = head; child !== undefined; child = child.sibling) {
          stack.push(child);
        }
      }
    }
  }

  /**
   * Walks the prefixes of `path` that hold (boundary rule included), longest first, and
   * returns the first result of `visit` that is not undefined. Allocates nothing itself.
   */
  find<R, A, B>(
    path: string,
    visit: (value: T, a: A, b: B) => R | undefined,
    a: A,
    b: B,
  ): R | undefined {
    return findFrom(this.#root, path, 0, visit, a, b);
  }
}

// Recursion keeps the chain of matched nodes on the call stack: deeper nodes are tried first
// and shorter prefixes on the way back, without building a list. Depth is bounded by the
// number of segments of the path. `end` is where this node's prefix ends in `path`: at its
// end or on a "/" (or, at the root, on whatever the path starts with).
function findFrom<T, R, A, B>(
  node: Node<T>,
  path: string,
  end: number,
  visit: (value: T, a: A, b: B) => R | undefined,
  a: A,
  b: B,
): R | undefined {
  const slash = end < path.length && path.charCodeAt(end) === SLASH;
  if (slash && (node.only !== undefined || node.children !== undefined)) {
    const stop = segmentEnd(path, end + 1, path.length);
    const child = childOf(node, path, end + 1, stop);
    if (child !== undefined) {
      const found = findFrom(child, path, stop, visit, a, b);
      if (found !== undefined) return found;
    }
  }
  if (slash && node.open !== undefined) {
    const found = visit(node.open, a, b);
    if (found !== undefined) return found;
  }
  if (node.value === undefined || !(slash || end === path.length)) return undefined;
  return visit(node.value, a, b);
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

/** The child of `node` whose segment is text[from, to), if there is one. */
function childOf<T>(node: Node<T>, text: string, from: number, to: number): Node<T> | undefined {
  const length = to - from;
  const only = node.only;
  if (only !== undefined) {
    return only.segment.length === length && text.startsWith(only.segment, from) ? only : undefined;
  }
  if (node.children === undefined) return undefined;
  let child = node.children.get(hashOf(text, from, to));
  while (child !== undefined) {
    if (child.segment.length === length && text.startsWith(child.segment, from)) return child;
    child = child.sibling;
  }
  return undefined;
}

/** A key ending in "/" (but not "" itself) lives in the `open` slot of its parent's node. */
function isOpen(prefix: string): boolean {
  return prefix.length > 0 && prefix.charCodeAt(prefix.length - 1) === SLASH;
}

function setSlot<T>(node: Node<T>, prefix: string, value: T | undefined): void {
  if (isOpen(prefix)) node.open = value;
  else node.value = value;
}

/**
 * The node that holds `prefix` under `root`, made if missing. With `copyPath`, every existing
 * node walked through is replaced by a copy first (and the copies of its collision chain
 * before it), so a tree sharing the originals (PrefixTree.with) is left unchanged.
 */
function nodeFor<T>(
  root: Node<T>,
  prefix: string,
  copyPath: boolean,
  segments?: Map<string, string>,
): Node<T> {
  const end = isOpen(prefix) ? prefix.length - 1 : prefix.length;
  if (end > 0 && prefix.charCodeAt(0) !== SLASH) {
    throw new Error(`prefix ${JSON.stringify(prefix)} does not start with "/"`);
  }
  let node = root;
  for (let at = 0; at < end; ) {
    const stop = segmentEnd(prefix, at + 1, end);
    let child = childOf(node, prefix, at + 1, stop);
    if (child === undefined) {
      let segment = prefix.slice(at + 1, stop);
      if (segments !== undefined) {
        const shared = segments.get(segment);
        if (shared === undefined) segments.set(segment, segment);
        else segment = shared;
      }
      child = new Node<T>(segment, hashOf(prefix, at + 1, stop));
      addChild(node, child);
    } else if (copyPath) {
      const copy = child.copy();
      if (node.only === child) {
        node.only = copy;
      } else {
        const children = node.children as Map<number, Node<T>>;
        children.set(child.hash, replaced(children.get(child.hash) as Node<T>, child, copy));
      }
      child = copy;
    }
    node = child;
    at = stop;
  }
  return node;
}

/** Adds a new `child` (not yet in any tree) under `node`, which is its own or a copy. */
function addChild<T>(node: Node<T>, child: Node<T>): void {
  if (node.only === undefined && node.children === undefined) {
    node.only = child;
    return;
  }
  if (node.only !== undefined) {
    node.children = new Map([[node.only.hash, node.only]]);
    node.only = undefined;
  }
  const children = node.children as Map<number, Node<T>>;
  child.sibling = children.get(child.hash);
  children.set(child.hash, child);
}

/** The chain from `head` with `old` swapped for `copy`; nodes before it are copied, not changed. */
function replaced<T>(head: Node<T>, old: Node<T>, copy: Node<T>): Node<T> {
  if (head === old) return copy;
  return head.copy(replaced(head.sibling as Node<T>, old, copy));
}
