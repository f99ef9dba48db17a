/**
 * The execute stage: a step's plan → forward passes over the batch KV cache → one logits row per
 * run. `execute` has the BatchLayout apply the plan's layout work, then chooses the passes:
 * where the session takes ragged tokens (ortserve's attention kernel), the decoding rows, their
 * jump-forward tokens and the step's prompt chunks go through one pass, which reads the weights
 * once; otherwise a decode pass for the decoding rows (one new token each, every row at its own
 * length), a pass per row with jump-forward tokens, and a prefill pass per prompt chunk. A chunk
 * that needs every position's logits (prompt logprobs) always takes a pass of its own, and so do
 * the prompt chunks in rows after it.
 */
import { Tensor } from "onnxruntime-node";
import type { PrefixCache } from "../cache/prefix-cache.ts";
import { TOKEN_ROWS } from "./attention-graph.ts";
import { AttentionMask } from "./attention-mask.ts";
import { BatchLayout, type LayoutPlan, type PassRun } from "./batch-layout.ts";
import type { DecoderSession } from "./decoder-session.ts";
import type { KvRows } from "./kv-rows.ts";
import type { KvSlots } from "./kv-slots.ts";

export interface ForwardResult {
  /** Row-major logits: one row per kept position. */
  logits: Float32Array;
  vocab: number;
}

function int64(values: ArrayLike<number>, dims: number[]): Tensor {
  const data = new BigInt64Array(values.length);
  for (let i = 0; i < values.length; i++) data[i] = BigInt(values[i]!);
  return new Tensor("int64", data, dims);
}

/** New tokens for one row of a ragged pass: appended to the row, which holds `start` positions. */
export interface RowTokens {
  tokens: readonly number[];
  start: number;
}

/** A step's logits: per run of the plan (same order), its kept rows (none where it keeps none). */
export interface StepOutput {
  logits: (Float32Array | undefined)[];
  vocab: number;
  /** Whether decoding rows and a prompt chunk went through one pass. */
  mixed: boolean;
  /** Forward passes the step took. */
  passes: number;
}

/** The execute stage as the engine sees it: forward passes over KV rows. */
export interface ModelRunner {
  readonly kv: KvRows;
  /**
   * Whether several prompts' chunks share one pass, so a step may start several prompts. Without
   * ragged passes (onnxruntime-node's session, or ORTSERVE_MIXED_STEPS=0) each chunk would take a
   * pass of its own, and onnxruntime's MatMulNBits may round a chunk differently with its length:
   * one prompt at a time keeps those paths as they are.
   */
  readonly batchesPrompts: boolean;
  /**
   * Applies the plan's layout work and runs its passes. Logits are valid until the next call
   * (the session may reuse their memory).
   */
  execute(plan: LayoutPlan): Promise<StepOutput>;
  /** Forgets every row (after a failed pass the cache is in an unknown state). */
  reset(): void;
  /** Frees the session; the runner is unusable afterwards. */
  release(): Promise<void>;
}

export interface BatchRunnerOptions {
  /** The prefix cache complete prompts' blocks go to. */
  prefixCache?: PrefixCache;
  /** Decoding rows and a prompt chunk in one pass where the session can (default true). */
  mixedSteps?: boolean;
}

export class BatchRunner implements ModelRunner {
  readonly session: DecoderSession;
  readonly kv: KvSlots;
  readonly mixes: boolean;
  readonly batchesPrompts: boolean;
  private readonly layout: BatchLayout;
  private readonly mixedSteps: boolean;
  private busy = false;
  /** attention_mask buffers: decode passes bind rows [0, n), prefill passes one row, ragged ones theirs. */
  private readonly decodeMask = new AttentionMask();
  private readonly prefillMask = new AttentionMask();
  private readonly raggedMask = new AttentionMask();

  /** Whether decoding rows and prompt chunks may share a pass is the session's `ragged`. */
  constructor(session: DecoderSession, kv: KvSlots, options: BatchRunnerOptions = {}) {
    this.session = session;
    this.kv = kv;
    this.mixes = session.ragged;
    this.layout = new BatchLayout(kv, options.prefixCache);
    this.mixedSteps = options.mixedSteps ?? true;
    this.batchesPrompts = this.mixes && this.mixedSteps;
  }

  async execute(plan: LayoutPlan): Promise<StepOutput> {
    const rows = this.layout.apply(plan);
    const out = await this.passes(plan.runs, rows);
    this.layout.savePrefixes(plan);
    return out;
  }

  reset(): void {
    this.layout.clear();
  }

  /** The step's passes: one ragged pass where it can, else one per kind (see the module comment). */
  private async passes(runs: readonly PassRun[], rows: readonly number[]): Promise<StepOutput> {
    const byRow = (list: number[]) => list.sort((i, j) => rows[i]! - rows[j]!);
    const decoding = byRow(runs.flatMap((r, i) => (r.prompt ? [] : [i])));
    const prompts = byRow(runs.flatMap((r, i) => (r.prompt ? [i] : [])));
    const logits: (Float32Array | undefined)[] = runs.map(() => undefined);
    let vocab = 0;
    let mixed = false;
    let passes = 0;
    /** Rows taken from an earlier pass are copied before the next one: the session reuses the memory. */
    const keep = () => {
      logits.forEach((l, i) => {
        if (l) logits[i] = l.slice();
      });
    };
    const jumps = decoding.some((i) => runs[i]!.tokens.length > 1);
    // The prompt chunks in the rows before the first that keeps every logit share the ragged pass.
    // Debt: the ones after it take a pass each (the ragged pass keeps one logits row per row, and
    // its rows must be [0, runs)); the layout could put prompts keeping every logit last.
    const firstAll = prompts.findIndex((i) => runs[i]!.logits === "all");
    const together =
      this.mixes && this.mixedSteps && (decoding.length > 0 || prompts.length > 1)
        ? prompts.slice(0, firstAll < 0 ? prompts.length : firstAll)
        : [];
    const ragged = this.mixes && (decoding.length > 0 ? together.length > 0 || jumps : together.length > 1);
    const alone = ragged ? prompts.filter((i) => !together.includes(i)) : prompts;
    if (ragged) {
      const order = [...decoding, ...together];
      order.forEach((i, r) => {
        if (rows[i] !== r) throw new Error("a ragged pass's runs must hold rows [0, runs)");
      });
      passes++;
      const out = await this.ragged(order.map((i) => runs[i]!));
      vocab = out.vocab;
      mixed = decoding.length > 0 && together.length > 0;
      order.forEach((i, r) => {
        if (runs[i]!.logits !== "none") logits[i] = out.logits.subarray(r * vocab, (r + 1) * vocab);
      });
    } else if (decoding.length > 0) {
      decoding.forEach((i, r) => {
        if (rows[i] !== r) throw new Error("a decode pass's runs must hold rows [0, runs)");
      });
      passes++;
      const out = await this.decode(
        decoding.map((i) => runs[i]!.tokens[0]!),
        decoding.map((i) => runs[i]!.start),
      );
      vocab = out.vocab;
      decoding.forEach((i, r) => {
        logits[i] = out.logits.subarray(r * vocab, (r + 1) * vocab);
      });
      // Jump-forward tokens take a pass of their own per row; the row samples after the last one.
      for (const i of decoding) {
        const run = runs[i]!;
        if (run.tokens.length === 1) continue;
        keep();
        passes++;
        const own = await this.prefill(rows[i]!, run.tokens.slice(1), run.start + 1);
        logits[i] = own.logits.subarray(own.logits.length - vocab);
      }
    }
    for (const i of alone) {
      const run = runs[i]!;
      keep();
      passes++;
      const out = await this.prefill(rows[i]!, run.tokens, run.start, run.logits === "all" ? 0 : 1);
      vocab = out.vocab;
      if (run.logits !== "none") logits[i] = out.logits;
    }
    return { logits, vocab, mixed, passes };
  }

  release(): Promise<void> {
    return this.session.release();
  }

  private async run(
    firstRow: number,
    rows: number,
    ids: Tensor,
    positions: Tensor,
    validLengths: number[],
    keep: number,
    mask: AttentionMask,
    tokenRows?: Tensor,
  ): Promise<ForwardResult> {
    if (ids.dims.includes(0)) throw new Error("a forward pass needs at least one token");
    // The cache is fed and fetched in place: two overlapping runs would write the same memory.
    if (this.busy) throw new Error("the runner is already running a forward pass");
    this.busy = true;
    try {
      this.kv.ensurePositions(Math.max(...validLengths));
      const cache = this.kv.bind(firstRow, rows);
      const step: Record<string, Tensor> = {
        input_ids: ids,
        position_ids: positions,
        attention_mask: mask.rows(validLengths, this.kv.capacity),
        num_logits_to_keep: new Tensor("int64", BigInt64Array.of(BigInt(keep)), []),
        ...(tokenRows ? { [TOKEN_ROWS]: tokenRows } : {}),
      };
      // The cache comes as its binding object: a session that keeps it bound compares only the step's entries.
      const out = await this.session.run(step, { logits: null }, cache);
      const logits = out.logits!;
      return { logits: logits.data as Float32Array, vocab: logits.dims[2]! };
    } finally {
      this.busy = false;
    }
  }

  /**
   * One token for each of rows [0, tokens.length); row r already holds `lengths[r]` positions.
   * Returns one logits row per sequence.
   */
  decode(tokens: readonly number[], lengths: readonly number[]): Promise<ForwardResult> {
    const n = tokens.length;
    return this.run(
      0,
      n,
      int64(tokens, [n, 1]),
      int64(lengths, [n, 1]),
      lengths.map((l) => l + 1),
      1,
      this.decodeMask,
    );
  }

  /**
   * Appends `tokens` to `row`, which holds `start` positions. Keeps the logits of the last
   * `keep` positions (0 = all, for prompt logprobs).
   */
  prefill(row: number, tokens: readonly number[], start: number, keep = 1): Promise<ForwardResult> {
    const n = tokens.length;
    return this.run(
      row,
      1,
      int64(tokens, [1, n]),
      int64(
        Array.from({ length: n }, (_, i) => start + i),
        [1, n],
      ),
      [start + n],
      keep,
      this.prefillMask,
    );
  }

  /**
   * Rows [0, runs.length) append their runs' tokens in one pass: every run's tokens but its last
   * first (token_rows gives each its row), then each run's last token in row order, so the logits
   * kept (the last runs.length positions) are one per row, in row order. The weights are read once
   * for all of them, and a token's floats are the bits separate passes would give (the attention
   * operator reads each row's length from its tokens' positions).
   */
  ragged(runs: readonly RowTokens[]): Promise<ForwardResult> {
    if (!this.mixes) throw new Error("this session cannot run ragged tokens in one pass");
    const ids: number[] = [];
    const positions: number[] = [];
    const rows: number[] = [];
    runs.forEach(({ tokens, start }, row) => {
      for (let i = 0; i < tokens.length - 1; i++) {
        ids.push(tokens[i]!);
        positions.push(start + i);
        rows.push(row);
      }
    });
    runs.forEach(({ tokens, start }, row) => {
      if (tokens.length === 0) throw new Error(`ragged run ${row} has no tokens`);
      ids.push(tokens.at(-1)!);
      positions.push(start + tokens.length - 1);
      rows.push(row);
    });
    const total = ids.length;
    return this.run(
      0,
      runs.length,
      int64(ids, [1, total]),
      int64(positions, [1, total]),
      runs.map(({ tokens, start }) => start + tokens.length),
      runs.length,
      this.raggedMask,
      int64(rows, [total]),
    );
  }
}
