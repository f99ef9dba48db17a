/**
 * Fidelity figures for one engine under test against the llama.cpp reference cases: next-token
 * agreement under teacher forcing, logprob error, and free-running greedy agreement. Positions are
 * also bucketed by index and grouped by prompt, so a position-dependent error (RoPE, KV cache) can
 * be told apart from one that is everywhere (weights) or confined to one kind of text.
 */
import { compareGreedy, type GreedyFigures } from "./greedy-compare.ts";
import type { TokenLogprob } from "./llama-reference.ts";
import type { ReferenceCase } from "./reference-cases.ts";

/** The reference's top-2 gap, in nats, above which its top-1 is a real decision, not a near-tie. */
export const DECISIVE_GAP = 0.1;
/**
 * An unquantized format against the exact model: the same function up to float rounding, so
 * near-ties may flip (top-1 at >= 99.9% of all positions) but logprobs stay within 1e-3 nats.
 */
export const EXACT_MIN_TOP1 = 0.999;
export const EXACT_MAX_LOGPROB_MAD = 1e-3;

/** The engine under test. */
export interface Candidate {
  readonly vocabSize: number;
  /** Logits (rows × vocab) for every position of `tokens`, fed from an empty cache. */
  teacherForced(tokens: readonly number[]): Promise<Float32Array>;
  /** Greedy continuation, stopping after EOS; without it the greedy check is skipped. */
  greedy?(promptTokens: readonly number[], n: number): Promise<number[]>;
}

export interface Miss {
  prompt: string;
  position: number;
  refTop: TokenLogprob[];
  candidateTop1: number;
  /** Candidate logprobs of its own top-1 and of the reference top-1. */
  candidateTop1Logprob: number;
  candidateLogprobOfRefTop1: number;
  text?: { context: string; ref: string; candidate: string };
}

interface Tally {
  positions: number;
  decisive: number;
  decisiveAgree: number;
  agree: number;
  absDiffSum: number;
}

export interface TallyFigures {
  positions: number;
  decisive: number;
  decisiveTop1Agreement: number;
  overallTop1Agreement: number;
  refTop1LogprobMad: number;
}

export interface FormatFigures extends TallyFigures {
  nearTies: number;
  nearTieTop1Agreement: number;
  refTop1LogprobMaxAbsDiff: number;
  /** Mean negative log-likelihood of the fed next tokens under each engine. */
  nextTokenNll: { reference: number; candidate: number };
  byPosition: ({ from: number; to: number } & TallyFigures)[];
  byPrompt: Record<string, TallyFigures>;
  greedy?: GreedyFigures;
  /** Decisive positions where the top-1 differs, biggest reference gap first (at most 20). */
  decisiveMisses: Miss[];
}

const BUCKETS = [0, 16, 32, 64, 128, 256, Number.POSITIVE_INFINITY];

function newTally(): Tally {
  return { positions: 0, decisive: 0, decisiveAgree: 0, agree: 0, absDiffSum: 0 };
}

function finish(t: Tally): TallyFigures {
  return {
    positions: t.positions,
    decisive: t.decisive,
    decisiveTop1Agreement: ratio(t.decisiveAgree, t.decisive),
    overallTop1Agreement: ratio(t.agree, t.positions),
    refTop1LogprobMad: ratio(t.absDiffSum, t.positions),
  };
}

function ratio(a: number, b: number): number {
  return b === 0 ? Number.NaN : a / b;
}

/** Argmax (first on ties) and log-sum-exp of one logit row. */
function rowStats(logits: Float32Array, offset: number, vocab: number): { top1: number; lse: number } {
  let top1 = 0;
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < vocab; i++) {
    const v = logits[offset + i]!;
    if (v > max) {
      max = v;
      top1 = i;
    }
  }
  let sum = 0;
  for (let i = 0; i < vocab; i++) sum += Math.exp(logits[offset + i]! - max);
  return { top1, lse: max + Math.log(sum) };
}

export interface CompareOptions {
  /** Turns ids into text for the miss report. */
  detokenize?: (ids: readonly number[]) => string;
  greedyTokens: number;
}

export async function compareFormat(
  cases: readonly ReferenceCase[],
  candidate: Candidate,
  opts: CompareOptions,
): Promise<FormatFigures> {
  const vocab = candidate.vocabSize;
  const total = newTally();
  const buckets = BUCKETS.slice(1).map(newTally);
  const byPrompt: Record<string, Tally> = {};
  let nearTies = 0;
  let nearTieAgree = 0;
  let maxAbsDiff = 0;
  let nllRef = 0;
  let nllCand = 0;
  let nllCount = 0;
  const misses: (Miss & { gap: number })[] = [];

  for (const c of cases) {
    const logits = await candidate.teacherForced(c.tokens);
    if (logits.length !== c.tokens.length * vocab) {
      throw new Error(`${c.id}: expected ${c.tokens.length} logit rows, got ${logits.length / vocab}`);
    }
    const promptTally = newTally();
    byPrompt[c.id] = promptTally;
    c.dists.forEach((dist, pos) => {
      if (pos < c.firstScored) return;
      const off = pos * vocab;
      const { top1, lse } = rowStats(logits, off, vocab);
      const [r1, r2] = dist.top as [TokenLogprob, TokenLogprob];
      const gap = r1.logprob - r2.logprob;
      const decisive = gap > DECISIVE_GAP;
      const agree = top1 === r1.id;
      const candRef1 = logits[off + r1.id]! - lse;
      const absDiff = Math.abs(candRef1 - r1.logprob);
      maxAbsDiff = Math.max(maxAbsDiff, absDiff);
      const bucket = buckets[BUCKETS.findIndex((b, i) => pos >= b && pos < BUCKETS[i + 1]!)]!;
      for (const t of [total, bucket, promptTally]) {
        t.positions++;
        t.absDiffSum += absDiff;
        if (agree) t.agree++;
        if (decisive) {
          t.decisive++;
          if (agree) t.decisiveAgree++;
        }
      }
      if (!decisive) {
        nearTies++;
        if (agree) nearTieAgree++;
      }
      const next = c.tokens[pos + 1];
      const refNext = next === undefined ? undefined : dist.logprobOf(next);
      if (next !== undefined && refNext !== undefined) {
        nllRef -= refNext;
        nllCand -= logits[off + next]! - lse;
        nllCount++;
      }
      if (decisive && !agree) {
        const miss: Miss & { gap: number } = {
          gap,
          prompt: c.id,
          position: pos,
          refTop: dist.top.slice(0, 3),
          candidateTop1: top1,
          candidateTop1Logprob: logits[off + top1]! - lse,
          candidateLogprobOfRefTop1: candRef1,
        };
        if (opts.detokenize) {
          miss.text = {
            context: opts.detokenize(c.tokens.slice(Math.max(0, pos - 7), pos + 1)),
            ref: opts.detokenize([r1.id]),
            candidate: opts.detokenize([top1]),
          };
        }
        misses.push(miss);
      }
    });
  }

  return {
    ...finish(total),
    nearTies,
    nearTieTop1Agreement: ratio(nearTieAgree, nearTies),
    refTop1LogprobMaxAbsDiff: maxAbsDiff,
    nextTokenNll: { reference: ratio(nllRef, nllCount), candidate: ratio(nllCand, nllCount) },
    byPosition: buckets
      .map((t, i) => ({ from: BUCKETS[i]!, to: BUCKETS[i + 1]!, ...finish(t) }))
      .filter((b) => b.positions > 0),
    byPrompt: Object.fromEntries(Object.entries(byPrompt).map(([id, t]) => [id, finish(t)])),
    greedy: await compareGreedy(cases, candidate, opts.greedyTokens, opts.detokenize),
    decisiveMisses: misses
      .sort((a, b) => b.gap - a.gap)
      .slice(0, 20)
      .map(({ gap: _gap, ...m }) => m),
  };
}

const percent = (x: number) => `${(x * 100).toFixed(2)}%`;

/**
 * Why an unquantized format is not the exact model (the GGUF dequantized to F32, run by llama.cpp);
 * empty when it is: top-1 equal almost everywhere, logprobs within float rounding, every greedy run
 * identical.
 */
export function exactFormatFailures(format: string, vsExact: FormatFigures): string[] {
  const failures: string[] = [];
  if (!(vsExact.overallTop1Agreement >= EXACT_MIN_TOP1)) {
    failures.push(
      `${format}: top-1 equals the exact model's at ${percent(vsExact.overallTop1Agreement)} of positions < ${percent(EXACT_MIN_TOP1)}`,
    );
  }
  if (!(vsExact.refTop1LogprobMad < EXACT_MAX_LOGPROB_MAD)) {
    failures.push(
      `${format}: mean logprob error ${vsExact.refTop1LogprobMad} nats >= ${EXACT_MAX_LOGPROB_MAD}`,
    );
  }
  if (!vsExact.greedy) failures.push(`${format}: greedy comparison missing`);
  else if (vsExact.greedy.median !== vsExact.greedy.tokens) {
    failures.push(
      `${format}: median identical greedy prefix with the exact model ${vsExact.greedy.median} < ${vsExact.greedy.tokens}`,
    );
  }
  return failures;
}

/**
 * Why a quantized format is further from the exact model than llama.cpp's own run of the same GGUF
 * (`baseline`, scored against the same exact reference); empty when it is at least as close, in
 * decisive top-1 agreement and in median identical greedy prefix. llama.cpp's quantized arithmetic
 * differs between instruction sets, so the bar moves with the CPU while the criterion does not.
 */
export function quantizedFormatFailures(
  format: string,
  vsExact: FormatFigures,
  baseline: FormatFigures,
): string[] {
  const failures: string[] = [];
  if (!(vsExact.decisiveTop1Agreement >= baseline.decisiveTop1Agreement)) {
    failures.push(
      `${format}: decisive top-1 agreement with the exact model ${percent(vsExact.decisiveTop1Agreement)} < llama.cpp's quantized run's ${percent(baseline.decisiveTop1Agreement)}`,
    );
  }
  if (!vsExact.greedy || !baseline.greedy) failures.push(`${format}: greedy comparison missing`);
  else if (!(vsExact.greedy.median >= baseline.greedy.median)) {
    failures.push(
      `${format}: median identical greedy prefix with the exact model ${vsExact.greedy.median} < llama.cpp's quantized run's ${baseline.greedy.median}`,
    );
  }
  return failures;
}
