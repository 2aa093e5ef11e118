// Which requestIds this executor has taken, and their results: ax delivers at least once, the
// same requestId on every delivery, so a run is done once however often it arrives.

/**
 * The default store: in this process's memory, so it forgets everything on a restart (a run
 * re-delivered then runs again, as ax's at-least-once delivery allows). Finished results are
 * kept `ttl` ms and at most `maxEntries` of them, the oldest finished dropped first.
 */
export class MemoryDedupeStore {
  #entries = new Map(); // requestId → {result?, finishedAt?}; Map keeps insertion order
  #ttl;
  #maxEntries;
  #now;

  constructor({ ttl = 24 * 3600 * 1000, maxEntries = 100_000, now = Date.now } = {}) {
    this.#ttl = ttl;
    this.#maxEntries = maxEntries;
    this.#now = now;
  }

  claim(requestId) {
    this.#prune();
    const entry = this.#entries.get(requestId);
    if (!entry) {
      this.#entries.set(requestId, {});
      return { state: "new" };
    }
    return entry.result ? { state: "done", result: entry.result } : { state: "running" };
  }

  finish(requestId, result) {
    // Re-inserted so the Map's order is the order runs finished in: the oldest come first.
    this.#entries.delete(requestId);
    this.#entries.set(requestId, { result, finishedAt: this.#now() });
    this.#prune();
  }

  release(requestId) {
    this.#entries.delete(requestId);
  }

  get size() {
    return this.#entries.size;
  }

  #prune() {
    const expired = this.#now() - this.#ttl;
    for (const [id, entry] of this.#entries) {
      if (!entry.result) continue; // running: never dropped, whatever its age
      if (entry.finishedAt > expired && this.#entries.size <= this.#maxEntries) break;
      this.#entries.delete(id);
    }
  }
}
