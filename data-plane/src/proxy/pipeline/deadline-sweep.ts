/**
 * Deadlines of in-flight requests, kept without a timer per request. A route's totalMs is
 * always set, so a timer per request meant an allocated Timeout, a list insert and a
 * clearTimeout on every request, though almost none ever fires. Here requests with the same
 * duration share one list: they join it in arrival order, so its deadlines are ascending and
 * the head is the next to expire. One Node timer per list is armed for the head; it fires on
 * time for the head, expires every entry due, and re-arms for the new head. Under steady load
 * the head is the oldest request in flight, so the timer fires about once per duration, not
 * once per request. Leaving is an O(1) unlink with no allocation, and never touches the timer:
 * a list that empties keeps it until it fires (finding nothing due, it lapses), so the next
 * entry reuses it. Clearing it there made a proxy with one request in flight at a time (sparse
 * traffic, or stream idle cuts, whose streams often end in the tick they start) clear and arm
 * a Node timer for every request. The timer is unref'd: a request in flight holds the process
 * open through its sockets, and an idle one need not wait a duration to exit.
 */
export interface DeadlineEntry {
  /** When the entry expires, on the sweep's clock. */
  deadline: number;
  /** Links of the list the entry is in; the sweep owns them. */
  prev: DeadlineEntry | undefined;
  next: DeadlineEntry | undefined;
  list: DeadlineList | undefined;
  /** Called once when the deadline passes while the entry is still in its list. */
  expired(): void;
}

/** The entries of one duration, ascending by deadline, and the one timer that serves them. */
export class DeadlineList {
  head: DeadlineEntry | undefined = undefined;
  tail: DeadlineEntry | undefined = undefined;
  timer: NodeJS.Timeout | undefined = undefined;
  /** When the armed timer fires, on the sweep's clock. */
  firesAt = 0;

  constructor(
    readonly durationMs: number,
    readonly now: () => number,
  ) {}
}

export class DeadlineSweep {
  readonly #lists = new Map<number, DeadlineList>();

  /** `now` in milliseconds, monotonic; the default is the process's high-resolution clock. */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * Puts `entry` in the list of `durationMs`; it expires that long from now. An entry still in
   * a list leaves it first, so adding it again restarts its deadline (undici may start a request
   * again on a new HTTP/2 stream, and a 1xx answer restarts the wait for headers).
   */
  add(entry: DeadlineEntry, durationMs: number): void {
    if (entry.list !== undefined) this.remove(entry);
    let list = this.#lists.get(durationMs);
    if (list === undefined) {
      list = new DeadlineList(durationMs, this.now);
      this.#lists.set(durationMs, list);
    }
    // Whole milliseconds, rounded up (never early): a fractional deadline made the entry's
    // field a double, and V8 boxes a double field in a heap number of its own for every new
    // entry (16 B a request for each of the total and headers deadlines); a whole number
    // stays inline (up to 2^31 ms, 24 days after start, past which it is a double again).
    const now = this.now();
    entry.deadline = Math.ceil(now) + durationMs;
    entry.list = list;
    entry.next = undefined;
    entry.prev = list.tail;
    if (list.tail === undefined) list.head = entry;
    else list.tail.next = entry;
    list.tail = entry;
    if (list.timer === undefined) arm(list, entry.deadline, now);
  }

  /** Takes `entry` out before its deadline; a no-op when it already left or expired. */
  remove(entry: DeadlineEntry): void {
    const list = entry.list;
    if (list !== undefined) unlink(list, entry);
  }

  /** Timers held now: at most one per duration, never one per entry. */
  get timers(): number {
    let count = 0;
    for (const list of this.#lists.values()) if (list.timer !== undefined) count++;
    return count;
  }
}

function unlink(list: DeadlineList, entry: DeadlineEntry): void {
  if (entry.prev === undefined) list.head = entry.next;
  else entry.prev.next = entry.next;
  if (entry.next === undefined) list.tail = entry.prev;
  else entry.next.prev = entry.prev;
  entry.prev = undefined;
  entry.next = undefined;
  entry.list = undefined;
}

/** Arms `list`'s timer for `firesAt`, the deadline of its head (a sweep any earlier finds nothing due). */
function arm(list: DeadlineList, firesAt: number, now: number): void {
  list.firesAt = firesAt;
  // Whole milliseconds, rounded up: a timer fired early would find nothing due and re-arm.
  list.timer = setTimeout(sweep, Math.max(1, Math.ceil(firesAt - now)), list).unref();
}

/**
 * Expires every entry whose deadline passed, oldest first, then re-arms for the next one (an
 * empty list's timer lapses). An entry's `expired` may remove other entries (or add some): the
 * loop re-reads the head each time.
 */
function sweep(list: DeadlineList): void {
  list.timer = undefined;
  // Node may fire a timer up to a millisecond early against performance.now(): the time the
  // timer was armed for counts as reached.
  const now = Math.max(list.now(), list.firesAt);
  for (let entry = list.head; entry !== undefined && entry.deadline <= now; entry = list.head) {
    unlink(list, entry);
    entry.expired();
  }
  const head = list.head;
  if (head !== undefined && list.timer === undefined) arm(list, head.deadline, now);
}
