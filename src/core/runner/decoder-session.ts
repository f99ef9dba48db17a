/**
 * Single-sequence decoder runner over an Optimum-style decoder-with-past ONNX
 * model. The session is shared; each DecoderSequence owns its KV tensors.
 */
import type { InferenceSession, Tensor } from "onnxruntime-node";
import { buildStepFeeds, LOGITS_TO_KEEP, logitsToKeepFeed } from "./feeds.ts";
import { KvCache, pastName, pastNames, presentNames } from "./kv-cache.ts";
import { type DecoderConfig, loadDecoderConfig } from "../model/model-config.ts";
import { createDecoderSession, type ModelFormat } from "./ort-session.ts";

export interface DecoderSessionOptions {
  format?: ModelFormat;
  intraOpThreads?: number;
  interOpThreads?: number;
}

export interface ForwardOptions {
  /** Return logits for every position of this chunk instead of only the last. */
  allLogits?: boolean;
}

type Outputs = Record<string, Tensor>;

/**
 * How `num_logits_to_keep` is handled. ORT does not list graph inputs that are
 * backed by an initializer, so an unlisted one is probed on the first run.
 */
type LogitsToKeepSupport = "accepted" | "probe" | "absent";

function checkContract(session: InferenceSession, numLayers: number): void {
  const inputs = new Set(session.inputNames);
  const outputs = new Set(session.outputNames);
  const missingIn = ["input_ids", "attention_mask", ...pastNames(numLayers)].filter((n) => !inputs.has(n));
  const missingOut = ["logits", ...presentNames(numLayers)].filter((n) => !outputs.has(n));
  if (missingIn.length || missingOut.length) {
    throw new Error(
      `model does not follow the decoder-with-past contract; missing inputs [${missingIn.join(", ")}]` +
        ` outputs [${missingOut.join(", ")}]`,
    );
  }
  const past = session.inputMetadata?.find((m) => m.name === pastName(0, "key"));
  if (past?.isTensor && past.type !== "float32")
    throw new Error(`KV cache must be float32, got ${past.type}`);
}

export class DecoderSession {
  readonly config: DecoderConfig;
  readonly #session: InferenceSession;
  readonly #inputs: Set<string>;
  readonly #fetches: string[];
  #logitsToKeep: LogitsToKeepSupport;

  private constructor(session: InferenceSession, config: DecoderConfig) {
    this.#session = session;
    this.config = config;
    this.#inputs = new Set(session.inputNames);
    this.#fetches = ["logits", ...presentNames(config.numLayers)];
    this.#logitsToKeep = this.#inputs.has(LOGITS_TO_KEEP) ? "accepted" : "probe";
  }

  static async load(modelDir: string, opts: DecoderSessionOptions = {}): Promise<DecoderSession> {
    const config = await loadDecoderConfig(modelDir);
    const session = await createDecoderSession(modelDir, opts.format ?? "q4", opts);
    try {
      checkContract(session, config.numLayers);
    } catch (err) {
      await session.release();
      throw err;
    }
    return new DecoderSession(session, config);
  }

  /** Whether the model can return only the last logit rows; undefined until the first run has probed it. */
  get trimsLogits(): boolean | undefined {
    return this.#logitsToKeep === "probe" ? undefined : this.#logitsToKeep === "accepted";
  }

  newSequence(): DecoderSequence {
    return new DecoderSequence(this, new KvCache(this.config));
  }

  /**
   * One forward pass appending `tokenIds` after `kv`. `keep` is the number of
   * trailing logit rows wanted (0 = all); models without the input return all rows.
   */
  async run(tokenIds: readonly number[], kv: KvCache, keep: number): Promise<Outputs> {
    const feeds: Record<string, Tensor> = {};
    for (const [name, t] of Object.entries(buildStepFeeds(tokenIds, kv.length))) {
      // Older exports have no position_ids; feed only what the graph declares.
      if (this.#inputs.has(name)) feeds[name] = t;
    }
    Object.assign(feeds, kv.feeds());
    if (this.#logitsToKeep === "absent") return this.#exec(feeds);
    feeds[LOGITS_TO_KEEP] = logitsToKeepFeed(keep);
    if (this.#logitsToKeep === "accepted") return this.#exec(feeds);
    try {
      const out = await this.#exec(feeds);
      this.#logitsToKeep = "accepted";
      return out;
    } catch (err) {
      delete feeds[LOGITS_TO_KEEP];
      const out = await this.#exec(feeds).catch(() => Promise.reject(err));
      // The retry worked, so the model simply has no such input: never send it again.
      this.#logitsToKeep = "absent";
      return out;
    }
  }

  async #exec(feeds: Record<string, Tensor>): Promise<Outputs> {
    return (await this.#session.run(feeds, this.#fetches)) as Outputs;
  }

  release(): Promise<void> {
    return this.#session.release();
  }
}

export class DecoderSequence {
  readonly #owner: DecoderSession;
  #kv: KvCache | undefined;
  #busy = false;

  constructor(owner: DecoderSession, kv: KvCache) {
    this.#owner = owner;
    this.#kv = kv;
  }

  /** Number of positions held in the KV cache. */
  get length(): number {
    return this.#kv?.length ?? 0;
  }

  /**
   * Appends `tokenIds` to the sequence and returns vocab-sized logit rows,
   * concatenated: one per token of this chunk with `allLogits`, else only the last.
   */
  async forward(tokenIds: readonly number[], opts: ForwardOptions = {}): Promise<Float32Array> {
    const kv = this.#kv;
    if (!kv) throw new Error("sequence disposed");
    if (this.#busy) throw new Error("sequence already running a forward pass");
    if (tokenIds.length === 0) throw new Error("forward needs at least one token");
    const { vocabSize, maxPositions } = this.#owner.config;
    if (kv.length + tokenIds.length > maxPositions) {
      throw new Error(`sequence would exceed ${maxPositions} positions`);
    }
    const all = opts.allLogits ?? false;
    this.#busy = true;
    try {
      const out = await this.#owner.run(tokenIds, kv, all ? 0 : 1);
      kv.advance(out, tokenIds.length);
      return takeLogits(out.logits, all ? tokenIds.length : 1, vocabSize);
    } finally {
      this.#busy = false;
    }
  }

  dispose(): void {
    this.#kv?.dispose();
    this.#kv = undefined;
  }
}

/** The last `rows` rows of a [1, n, vocab] logits tensor; disposes the tensor. */
function takeLogits(logits: Tensor, rows: number, vocab: number): Float32Array {
  const data = logits.data as Float32Array;
  logits.dispose();
  const have = data.length / vocab;
  if (have < rows) throw new Error(`expected ${rows} logit rows, model returned ${have}`);
  if (have === rows) return data;
  // Copy so a prompt-sized output buffer is not kept alive by a one-row view.
  return data.slice((have - rows) * vocab);
}
