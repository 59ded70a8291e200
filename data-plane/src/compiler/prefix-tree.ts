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

  private constructor(root: Node<T>) {
    this.#root = root;
    Object.freeze(this);
  }

  /** Builds the tree of `entries` (prefix, value); a prefix may appear once. */
  static build<T>(entries: Iterable<readonly [string, T]>): PrefixTree<T> {
    const root = newNode<T>("");
    for (const [prefix, value] of entries) insert(root, prefix, value);
    return new PrefixTree(root);
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

function newNode<T>(label: string): Node<T> {
  return { label, children: new Map(), value: undefined, boundary: false };
}

function insert<T>(root: Node<T>, prefix: string, value: T): void {
  let node = root;
  let at = 0;
  while (at < prefix.length) {
    const key = prefix.charCodeAt(at);
    const child = node.children.get(key);
    if (child === undefined) {
      const leaf = newNode<T>(prefix.slice(at));
      node.children.set(key, leaf);
      node = leaf;
      at = prefix.length;
      break;
    }
    const common = commonLength(child.label, prefix, at);
    if (common < child.label.length) {
      // The new prefix ends or diverges inside the child's edge: split the edge there.
      const middle = newNode<T>(child.label.slice(0, common));
      const rest: Node<T> = { ...child, label: child.label.slice(common) };
      middle.children.set(rest.label.charCodeAt(0), rest);
      node.children.set(key, middle);
      node = middle;
    } else {
      node = child;
    }
    at += common;
  }
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
