/**
 * A tiny dependency-free progress display on stderr. On a terminal it redraws one
 * line in place (throttled, so hot loops can call update freely); anywhere else
 * (CI logs, pipes) it prints a handful of plain lines instead of escape codes.
 */

export type ProgressUnit = "bytes" | "count";

/** The part of a stream the bar needs; process.stderr fits, and so does a test double. */
export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(chunk: string): unknown;
}

export interface ProgressOptions {
  /** Fixed text in front of the bar, e.g. "Extracting model.gguf". */
  title: string;
  total?: number;
  unit?: ProgressUnit;
  stream?: ProgressStream;
  /** Clock in ms, injectable for tests. */
  now?: () => number;
}

const REDRAW_MS = 100;
const LOG_STEP_PERCENT = 25;
const BAR_WIDTH = 24;

export function formatAmount(value: number, unit: ProgressUnit): string {
  if (unit === "count") return String(value);
  if (value < 1024) return `${value} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = value / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

export class ProgressBar {
  readonly #stream: ProgressStream;
  readonly #tty: boolean;
  readonly #title: string;
  readonly #unit: ProgressUnit;
  readonly #now: () => number;
  readonly #started: number;
  #total: number;
  #done = 0;
  #detail = "";
  #lastDraw = Number.NEGATIVE_INFINITY;
  #nextLogPercent = LOG_STEP_PERCENT;
  #lineOpen = false;
  #closed = false;

  constructor(options: ProgressOptions) {
    this.#stream = options.stream ?? process.stderr;
    this.#tty = this.#stream.isTTY === true;
    this.#title = options.title;
    this.#unit = options.unit ?? "count";
    this.#total = options.total ?? 0;
    this.#now = options.now ?? Date.now;
    this.#started = this.#now();
    if (!this.#tty)
      this.#stream.write(`${this.#title}${this.#total ? ` (${this.#amount(this.#total)})` : ""}\n`);
  }

  /** Report progress; `total` and `detail` may change as work is discovered. */
  update(done: number, total?: number, detail?: string): void {
    if (this.#closed) return;
    this.#done = done;
    if (total !== undefined) this.#total = total;
    if (detail !== undefined) this.#detail = detail;
    if (this.#tty) {
      const t = this.#now();
      if (t - this.#lastDraw >= REDRAW_MS || (this.#total > 0 && done >= this.#total)) {
        this.#lastDraw = t;
        this.#draw();
      }
      return;
    }
    // Plain output: one line per quarter, skipping any quarters a big jump passed over.
    const percent = this.#percent();
    if (percent === undefined || percent < this.#nextLogPercent || percent >= 100) return;
    while (this.#nextLogPercent <= percent) this.#nextLogPercent += LOG_STEP_PERCENT;
    this.#stream.write(`  ${this.#status(percent)}\n`);
  }

  /** Finish successfully: final state plus elapsed time. */
  done(summary?: string): void {
    if (this.#closed) return;
    this.#closed = true;
    const seconds = ((this.#now() - this.#started) / 1000).toFixed(1);
    const tail = summary ?? `${this.#amount(this.#done)} in ${seconds}s`;
    if (this.#tty) {
      // Replace the bar with a one-line summary that stays in the scrollback.
      this.#stream.write(`\r${this.#title}: ${tail}\x1b[K\n`);
    } else {
      this.#stream.write(`  done: ${tail}\n`);
    }
  }

  /** Stop without a summary (on failure), leaving the cursor on a fresh line for the error. */
  abort(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#lineOpen) this.#stream.write("\n");
  }

  #percent(): number | undefined {
    if (this.#total <= 0) return undefined;
    return Math.min(100, Math.floor((this.#done / this.#total) * 100));
  }

  #amount(value: number): string {
    return formatAmount(value, this.#unit);
  }

  #status(percent: number | undefined): string {
    const amounts =
      this.#total > 0 ? `${this.#amount(this.#done)}/${this.#amount(this.#total)}` : this.#amount(this.#done);
    const parts = [percent === undefined ? "" : `${String(percent).padStart(3)}%`, amounts, this.#detail];
    return parts.filter((p) => p !== "").join("  ");
  }

  #draw(): void {
    const percent = this.#percent();
    const filled = percent === undefined ? 0 : Math.round((percent / 100) * BAR_WIDTH);
    const bar = `[${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}]`;
    let line = `${this.#title} ${bar} ${this.#status(percent)}`;
    const columns = this.#stream.columns || 80; // 0 on some pseudo-terminals
    if (line.length > columns - 1) line = line.slice(0, Math.max(0, columns - 1));
    // \r returns to column 0, ESC[K clears what a longer previous line left behind.
    this.#stream.write(`\r${line}\x1b[K`);
    this.#lineOpen = true;
  }
}
