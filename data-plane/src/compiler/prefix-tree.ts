/*
 * A radix tree (compressed trie on characters) over route path prefixes, so finding the
 * prefixes of a request path costs one map lookup per tree level and a comparison of the
 * path's own characters, whatever the number of routes. Scanning the prefixes one by one,
 * longest first, made a match at 10,000 routes cost thousands of string comparisons.
 *
 * The segment-boundary rule of route-table.ts lives here: a prefix that does not end in "/"
 * ("/api") holds only when the path ends right after it or continues with "/" ("/api",
 * "/api/x", not "/apix"); a prefix ending in "/" ("/", "/static/") holds for every path that
 * starts with it. A match tries the deepest prefix first and falls back to shorter ones on
 * the way up, so "longer prefix first" needs no sorting at match time.
 */

/** One node; `label` is the text on the edge from its parent (empty only at the root). */
interface Node<T> {
  readonly label: string;
  /** Children keyed by the first character code of their label. */
  readonly children: Map<number, Node<T>>;
  /** The value of the prefix that ends exactly at this node, if one does. */
  value: T | undefined;
  /** False when that prefix ends in "/": any continuation matches. */
  boundary: boolean;
}

const SLASH = 47;

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
    const root = newNode<T>("");
    let size = 0;
    for (const [prefix, value] of entries) {
      insert(root, prefix, value);
      size += 1;
    }
    return new PrefixTree(root, size);
  }

  /** The value stored at exactly `prefix`, if any. */
  get(prefix: string): T | undefined {
    let node = this.#root;
    let at = 0;
    while (at < prefix.length) {
      const child = node.children.get(prefix.charCodeAt(at));
      if (child === undefined || !prefix.startsWith(child.label, at)) return undefined;
      node = child;
      at += child.label.length;
    }
    return node.value;
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
    const root = copyNode(this.#root);
    const node = nodeFor(root, prefix, true);
    node.value = value;
    node.boundary = !prefix.endsWith("/");
    const size = this.size + (value === undefined ? -1 : had ? 0 : 1);
    return new PrefixTree(root, size);
  }

  /** Every value in the tree. */
  *values(): Generator<T> {
    const stack: Node<T>[] = [this.#root];
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      if (node.value !== undefined) yield node.value;
      for (const child of node.children.values()) stack.push(child);
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
// number of distinct prefixes along one path, which the path's own length bounds.
function findFrom<T, R, A, B>(
  node: Node<T>,
  path: string,
  end: number,
  visit: (value: T, a: A, b: B) => R | undefined,
  a: A,
  b: B,
): R | undefined {
  if (end < path.length) {
    const child = node.children.get(path.charCodeAt(end));
    if (child !== undefined && path.startsWith(child.label, end)) {
      const found = findFrom(child, path, end + child.label.length, visit, a, b);
      if (found !== undefined) return found;
    }
  }
  if (node.value === undefined) return undefined;
  if (node.boundary && end < path.length && path.charCodeAt(end) !== SLASH) return undefined;
  return visit(node.value, a, b);
}

/** A node with its own children map, sharing the children themselves. */
function copyNode<T>(node: Node<T>): Node<T> {
  return { ...node, children: new Map(node.children) };
}

function newNode<T>(label: string): Node<T> {
  return { label, children: new Map(), value: undefined, boundary: false };
}

function insert<T>(root: Node<T>, prefix: string, value: T): void {
  const node = nodeFor(root, prefix, false);
  if (node.value !== undefined) throw new Error(`prefix ${prefix} inserted twice`);
  node.value = value;
  node.boundary = !prefix.endsWith("/");
}

/** How many characters of `label` equal those of `text` from `from`. */
function commonLength(label: string, text: string, from: number): number {
  let i = 0;
  while (i < label.length && from + i < text.length && label[i] === text[from + i]) i++;
  return i;
}

/**
 * The node that holds `prefix` under `root`, made if missing: an edge the prefix ends or
 * diverges inside is split there. With `copyPath`, every existing node walked through is
 * replaced by a copy first, so a tree sharing the originals (PrefixTree.with) is left unchanged.
 */
function nodeFor<T>(root: Node<T>, prefix: string, copyPath: boolean): Node<T> {
  let node = root;
  let at = 0;
  while (at < prefix.length) {
    const key = prefix.charCodeAt(at);
    const child = node.children.get(key);
    if (child === undefined) {
      const leaf = newNode<T>(prefix.slice(at));
      node.children.set(key, leaf);
      return leaf;
    }
    const common = commonLength(child.label, prefix, at);
    if (common < child.label.length) {
      const middle = newNode<T>(child.label.slice(0, common));
      const rest: Node<T> = { ...child, label: child.label.slice(common) };
      middle.children.set(rest.label.charCodeAt(0), rest);
      node.children.set(key, middle);
      node = middle;
    } else if (copyPath) {
      const copy = copyNode(child);
      node.children.set(key, copy);
      node = copy;
    } else {
      node = child;
    }
    at += common;
  }
  return node;
}
