/**
 * Heavy work on a thread that also serves others takes turns: one job per turn of the event loop,
 * in arrival order, so the I/O queued meanwhile (a stream's next chunk) runs between two of them
 * instead of behind all of them. A few large request bodies arriving together would otherwise be
 * parsed and validated back to back, and every running stream would wait for the sum.
 */
export class Turns {
  readonly #waiting: (() => void)[] = [];
  #scheduled = false;

  /** Resolves at the start of a turn of the caller's own; run the heavy step right after it. */
  next(): Promise<void> {
    return new Promise((resolve) => {
      this.#waiting.push(resolve);
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#waiting.length === 0) return;
    this.#scheduled = true;
    // An immediate queued from inside an immediate runs in the next loop iteration, after its I/O.
    setImmediate(() => {
      this.#scheduled = false;
      this.#waiting.shift()!();
      // The resolved job runs in this callback's microtasks; the next one waits for the next turn.
      this.#schedule();
    });
  }
}

/** The server's main thread: it writes every stream's chunks. */
export const mainThreadTurns = new Turns();
