/**
 * llama.cpp (through node-llama-cpp's prebuilt CPU binary) as the reference engine for the
 * fidelity comparison. Only tests and benchmarks use it, so it lives next to them.
 *
 * Distributions are read through `controlledEvaluate` with `logits` + `totalLogitWeight`: both are
 * taken from the candidate array after the sampler chain, and with the default temperature 0 and
 * no repeat penalty / token bias that chain is just the greedy picker, which only marks the argmax
 * and leaves every raw logit in place. So logprob = logit - maxLogit - ln(totalLogitWeight) exactly.
 *
 * The context runs without flash attention and with an F32 KV cache by default. With flash attention
 * the CPU backend switches attention kernels once a batch reaches 64 tokens, so the distribution at a
 * given position moves (by up to ~0.4 nats here) with the length of the batch it was computed in;
 * without it, chunks of 8, 32 or the whole sequence give bit-identical logprobs, which makes the
 * reference independent of how the tokens were batched.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type {
  ControlledEvaluateInputItem,
  Llama,
  LlamaContext,
  LlamaContextSequence,
  LlamaModel,
  Token,
} from "node-llama-cpp";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { readModelMeta } from "../../src/models/fetch/model-meta.ts";
import { committedModelsDir, ggufCacheDir } from "../../src/util/paths.ts";

/**
 * The GGUF the converter started from, as cached by setup (named by the model's ortserve.json);
 * `ORTSERVE_FIDELITY_GGUF` points elsewhere.
 */
export async function referenceGgufPath(
  modelId: string,
  env: Record<string, string | undefined> = process.env,
): Promise<string> {
  if (env.ORTSERVE_FIDELITY_GGUF) return env.ORTSERVE_FIDELITY_GGUF;
  const meta = await readModelMeta(join(committedModelsDir, modelId));
  return join(ggufCacheDir(env), meta.source.gguf_file);
}

export interface TokenLogprob {
  id: number;
  logprob: number;
}

/** The reference's next-token distribution after one prefix of a teacher-forced sequence. */
export interface ReferenceDist {
  /** Highest first; at least two entries. */
  top: TokenLogprob[];
  /** Known for the top entries, the next fed token and any requested extra ids; else undefined. */
  logprobOf(id: number): number | undefined;
}

export interface TeacherForcedOptions {
  /** How many top entries to keep per position (default 8). */
  topK?: number;
  /** Extra ids whose logprob is wanted, per position. */
  extraIds?: readonly (readonly number[])[];
  /** Feed this many tokens per decode call (default: all at once). */
  chunkSize?: number;
}

export interface LlamaReferenceOptions {
  threads?: number;
  contextSize?: number;
  /** Default false; see the module comment. */
  flashAttention?: boolean | "auto";
  /** Default F32. */
  kvCacheType?: "F16" | "F32";
}

let sharedLlama: Promise<Llama> | undefined;

/**
 * One llama.cpp instance per process, never disposed by a reference: its dispose tears down the
 * native backend that every other instance in the process shares. It cleans up before exit.
 */
function llamaInstance(): Promise<Llama> {
  sharedLlama ??= getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  return sharedLlama;
}

/** llama.cpp's own account of the CPU features its loaded backend uses (e.g. "AVX2 = 1 | AVX512 = 1"). */
export async function llamaCppSystemInfo(): Promise<string> {
  return (await llamaInstance()).systemInfo.trim();
}

export class LlamaReference {
  readonly eosId: number;
  /** Logit row width, probed at load time (the GGUF's vocab_size key is optional). */
  vocabSize = 0;
  readonly #model: LlamaModel;
  readonly #context: LlamaContext;
  readonly #seq: LlamaContextSequence;

  private constructor(model: LlamaModel, context: LlamaContext) {
    this.#model = model;
    this.#context = context;
    this.#seq = context.getSequence();
    this.eosId = model.tokens.eos ?? -1;
  }

  static async load(ggufPath: string, opts: LlamaReferenceOptions = {}): Promise<LlamaReference> {
    if (!existsSync(ggufPath)) throw new Error(`reference GGUF not found: ${ggufPath}`);
    const model = await (await llamaInstance()).loadModel({ modelPath: ggufPath });
    const contextSize = opts.contextSize ?? 1024;
    const context = await model.createContext({
      contextSize,
      batchSize: contextSize,
      threads: opts.threads ?? 2,
      sequences: 1,
      flashAttention: opts.flashAttention ?? false,
      experimentalKvCacheKeyType: opts.kvCacheType ?? "F32",
      experimentalKvCacheValueType: opts.kvCacheType ?? "F32",
    });
    const ref = new LlamaReference(model, context);
    ref.vocabSize = (
      await ref.#seq.controlledEvaluate([[0 as Token, { generateNext: { logits: true } }]])
    )[0]!.next.logits!.size;
    await ref.#seq.clearHistory();
    return ref;
  }

  /** Tokenizes with special tokens parsed and no BOS added (SmolLM2 sets add_bos_token = false). */
  tokenize(text: string): number[] {
    return [...this.#model.tokenize(text, true)];
  }

  detokenize(ids: readonly number[]): string {
    return this.#model.detokenize(ids as Token[], true);
  }

  /**
   * Feeds `tokens` from an empty cache in one pass and returns, for every position i, the
   * distribution of the token following tokens[0..i].
   */
  async teacherForced(tokens: readonly number[], opts: TeacherForcedOptions = {}): Promise<ReferenceDist[]> {
    const topK = Math.max(2, opts.topK ?? 8);
    const chunk = opts.chunkSize ?? tokens.length;
    await this.#seq.clearHistory();
    const dists: ReferenceDist[] = [];
    for (let start = 0; start < tokens.length; start += chunk) {
      const input: ControlledEvaluateInputItem[] = tokens.slice(start, start + chunk).map((t, j) => {
        const i = start + j;
        const wanted = [...(opts.extraIds?.[i] ?? [])];
        if (i + 1 < tokens.length) wanted.push(tokens[i + 1]!);
        const filter = { tokens: wanted as Token[], includeTop: topK };
        return [t as Token, { generateNext: { logits: { filter }, totalLogitWeight: true } }];
      });
      const out = await this.#seq.controlledEvaluate(input);
      input.forEach((_, j) => {
        const next = out[j]?.next;
        if (!next?.logits || next.totalLogitWeight == null)
          throw new Error(`no logits at position ${start + j}`);
        dists.push(toDist(next.logits, next.totalLogitWeight, topK));
      });
    }
    return dists;
  }

  /**
   * Full logit rows (rows × vocab) for every position, fed `chunkSize` tokens per decode call;
   * lets llama.cpp's own single-token decode be scored like any other engine.
   */
  async logitRows(tokens: readonly number[], chunkSize = tokens.length): Promise<Float32Array> {
    const vocabSize = this.vocabSize;
    await this.#seq.clearHistory();
    const rows = new Float32Array(tokens.length * vocabSize);
    for (let start = 0; start < tokens.length; start += chunkSize) {
      const chunk = tokens.slice(start, start + chunkSize);
      const out = await this.#seq.controlledEvaluate(
        chunk.map((t) => [t as Token, { generateNext: { logits: true } }] as ControlledEvaluateInputItem),
      );
      chunk.forEach((_, j) => {
        const logits = out[j]?.next.logits;
        if (!logits) throw new Error(`no logits at position ${start + j}`);
        const off = (start + j) * vocabSize;
        for (const [id, v] of logits) rows[off + id] = v;
      });
    }
    return rows;
  }

  /** Greedy continuation of `prompt`, one decode step per token, stopping after EOS. */
  async greedy(prompt: readonly number[], n: number): Promise<number[]> {
    await this.#seq.clearHistory();
    const out: number[] = [];
    let input: readonly number[] = prompt;
    while (out.length < n) {
      const items: ControlledEvaluateInputItem[] = input.map((t, i) =>
        i === input.length - 1 ? [t as Token, { generateNext: { token: true } }] : (t as Token),
      );
      const res = await this.#seq.controlledEvaluate(items);
      const tok = res[input.length - 1]?.next.token;
      if (tok == null) throw new Error("llama.cpp produced no token");
      out.push(tok);
      if (tok === this.eosId) break;
      input = [tok];
    }
    return out;
  }

  async dispose(): Promise<void> {
    this.#seq.dispose();
    await this.#context.dispose();
    await this.#model.dispose();
  }
}

function toDist(logits: Map<number, number>, totalWeight: number, topK: number): ReferenceDist {
  let max = Number.NEGATIVE_INFINITY;
  for (const v of logits.values()) if (v > max) max = v;
  const norm = max + Math.log(totalWeight);
  const logprobs = new Map<number, number>();
  for (const [id, v] of logits) logprobs.set(id, v - norm);
  const top = [...logprobs]
    .sort((a, b) => b[1] - a[1])
    .slice(0, topK)
    .map(([id, logprob]) => ({ id, logprob }));
  return { top, logprobOf: (id) => logprobs.get(id) };
}
