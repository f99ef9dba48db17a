/**
 * The decoder session of the native addon (native/src/session.cc): ONNX Runtime's C API with
 * IoBinding, so no tensor is copied in or out of a run. onnxruntime-node copies every fetched
 * output into a fresh ArrayBuffer after each run; for the KV cache (fetched as `present` over the
 * memory fed as `past_key_values`) that copy is most of a decode step at long contexts or large
 * batches, and this session makes it zero.
 *
 * It is a DecoderSession (decoder-session.ts): onnxruntime-node's Tensor stays the currency, and it
 * runs the same ONNX Runtime library onnxruntime-node ships (dlopened by the addon) with the options
 * createDecoderSession gives onnxruntime-node, so the numbers are bit-identical.
 *
 * - Feeds are bound over their tensors' memory.
 * - The binding is kept across runs, and only tensors that are not the objects bound last time
 *   cross into the addon: a decode step rebinds its ids, positions, mask and logits, while the
 *   KV cache's tensors (KvSlots hands out the same objects while its rows and buffers stay) stay
 *   bound. Binding all 2 x layers of them cost more than half a millisecond a step.
 * - A pre-allocated fetch is bound over its tensor's memory and comes back as that same tensor.
 * - A pass given the KV cache as one binding object (KvSlots.bind's) compares only the step's
 *   own entries with what is bound while that object stays the one bound (see runWithCache).
 * - A null fetch (the logits) whose shape the decoder contract tells before the run ([batch,
 *   num_logits_to_keep or sequence length, vocab]) is bound over a new Float32Array, so it is
 *   not copied either. With `reuseLogits` the session instead keeps one buffer, grown on demand,
 *   and every run's logits are a view of it: valid only until the next run. That is off for the
 *   engine, whose callers (tests among them) may hold a result across runs. An output of unknown
 *   shape is allocated by ONNX Runtime and copied out once.
 *
 * `nativeSessions` is undefined when the addon is not built, ONNX Runtime cannot be loaded, or
 * ORTSERVE_NATIVE_SESSION=0.
 */
import { readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { type InferenceSession, Tensor } from "onnxruntime-node";
import { runtimeFlags } from "../runtime-flags.ts";
import { cachedAttentionModel, rewrittenInputDefaults, TOKEN_ROWS } from "./attention-graph.ts";
import type { CacheTensors, DecoderSession } from "./decoder-session.ts";
import type { KvDtype } from "./kv-rows.ts";

interface RawMetadata {
  name: string;
  isTensor: boolean;
  type: number;
  /** -1 where the dimension is symbolic. */
  shape: number[];
  symbolicDimensions: string[];
}

interface RawTensor {
  name: string;
  type: number;
  data: ArrayBufferView;
  dims: readonly number[];
}

interface RawSession {
  readonly inputMetadata: RawMetadata[];
  readonly outputMetadata: RawMetadata[];
  /** Bytes of BlockQuantMatMul weights the session's kernels packed. */
  readonly packedWeightBytes: number;
  /**
   * Outputs given data are written in place and settle as undefined; the rest are copied out.
   * `mode`: 0 the run's own binding; 1 the session's kept binding, emptied first; 2 the kept
   * binding with what is given bound over it (see native/src/session.cc).
   */
  run(
    inputs: RawTensor[],
    outputs: (RawTensor | { name: string })[],
    mode?: BindingMode,
  ): Promise<({ type: number; dims: number[]; buffer: ArrayBuffer } | undefined)[]>;
  release(): void;
}

/** The addon's binding modes: the run's own binding, the kept one emptied, the kept one updated. */
const BindingMode = { Own: 0, KeptFresh: 1, KeptUpdate: 2 } as const;
type BindingMode = (typeof BindingMode)[keyof typeof BindingMode];

interface SessionAddon {
  /** The ONNX Runtime C API version the addon requests (native/src/ort-api.h). */
  readonly apiVersion: number;
  /** madvise(MADV_NOHUGEPAGE) over the array's whole pages: the advised [start, end), or undefined. */
  keepSmallPages(array: ArrayBufferView): [number, number] | undefined;
  /** Whether ortserve.BlockQuantMatMul runs a vector kernel on this CPU (AVX-512 VNNI or AVX2). */
  readonly blockQuantMatMulAccelerated: boolean;
  /** Its kernels this CPU runs, fastest first: "avx512-vnni", "avx2", "scalar". */
  readonly blockQuantMatMulKernels: readonly string[];
  /** Picks one for the process (a name this CPU lacks changes nothing); returns the one in use. */
  setBlockQuantMatMulKernel(name: string): string;
  /** The one in use. */
  blockQuantMatMulKernel(): string;
  /** Loads ONNX Runtime from `path` (once per process) and returns its version. */
  loadRuntime(path: string): string;
  Session: new (
    modelPath: string,
    intraOpThreads: number,
    interOpThreads: number,
    cachedAttention: boolean,
  ) => RawSession;
}

/** ONNX element types (onnxruntime_c_api.h) by Tensor type, and the typed array each uses. */
const ELEMENT_TYPES: Partial<Record<Tensor.Type, number>> = {
  float32: 1,
  uint8: 2,
  int8: 3,
  uint16: 4,
  int16: 5,
  int32: 6,
  int64: 7,
  bool: 9,
  float16: 10,
  float64: 11,
  uint32: 12,
  uint64: 13,
};
const TENSOR_TYPES = new Map(Object.entries(ELEMENT_TYPES).map(([k, v]) => [v, k as Tensor.Type]));
const ARRAYS: Record<number, new (buffer: ArrayBuffer) => Tensor.DataType> = {
  1: Float32Array,
  2: Uint8Array,
  3: Int8Array,
  4: Uint16Array,
  5: Int16Array,
  6: Int32Array,
  7: BigInt64Array,
  9: Uint8Array,
  10: Uint16Array,
  11: Float64Array,
  12: Uint32Array,
  13: BigUint64Array,
};

/** ORTSERVE_KEPT_BINDING=0 binds everything on every run (to measure what the kept binding saves). */
const KEEP_BINDING = runtimeFlags.keptBinding;

/** The reused logits buffer grows to at most this many floats (64 MiB); bigger outputs get their own. */
const REUSED_MAX_FLOATS = 16 * 1024 * 1024;

export interface NativeSessionOptions {
  intraOpThreads: number;
  interOpThreads: number;
  /** Logits go into one buffer the session reuses: each run's are valid until the next run. */
  reuseLogits?: boolean;
  /**
   * Runs attention with ortserve's kernel (native/src/attention.cc) instead of ONNX Runtime's
   * GroupQueryAttention, through the rewritten graph of attention-graph.ts. Default: on, unless
   * ORTSERVE_CACHED_ATTENTION=0.
   */
  cachedAttention?: boolean;
  /** With cachedAttention: the KV cache's element type (float16 halves its bytes). Default float32. */
  kvCacheDtype?: KvDtype;
}

function rawTensor(name: string, t: Tensor): RawTensor {
  const type = ELEMENT_TYPES[t.type];
  if (type === undefined)
    throw new Error(`${name}: tensor type ${t.type} is not supported by the native session`);
  if (t.location !== "cpu") throw new Error(`${name}: tensor data must be on the CPU`);
  let data = t.data as ArrayBufferView;
  // onnxruntime-common hands float16 data out as a Float16Array where the runtime has one, which
  // N-API does not take as a typed array: the addon gets the same bytes as a Uint16Array view.
  if (t.type === "float16" && !(data instanceof Uint16Array))
    data = new Uint16Array(data.buffer, data.byteOffset, data.byteLength / 2);
  return { name, type, data, dims: t.dims };
}

function metadata(raw: RawMetadata[]): InferenceSession.ValueMetadata[] {
  return raw.map((m) => {
    if (!m.isTensor) return { name: m.name, isTensor: false };
    const type = TENSOR_TYPES.get(m.type);
    if (type === undefined) throw new Error(`${m.name}: unsupported tensor type ${m.type}`);
    const shape = m.shape.map((d, i) => (d < 0 ? m.symbolicDimensions[i]! : d));
    return { name: m.name, isTensor: true, type, shape };
  });
}

/** The tensors a kept binding holds, by input and output name (weakly: see runKept). */
interface KeptBinding {
  inputs: Map<string, WeakRef<Tensor>>;
  outputs: Map<string, WeakRef<Tensor>>;
  /**
   * Set by runWithCache when its run bound this cache object and these step names (and nothing
   * has rebound since): the next step with the same object diffs only the step's own entries.
   */
  step?: StepBinding;
}

/** The cache binding object (KvSlots.bind's) and the step's own names a kept run bound with it. */
interface StepBinding {
  cache: CacheTensors;
  feeds: readonly string[];
  fetches: readonly string[];
}

/** Whether `names` are exactly the keys of `record`, in order. */
function sameKeys(names: readonly string[], record: Record<string, unknown>): boolean {
  let i = 0;
  for (const key in record) if (names[i++] !== key) return false;
  return i === names.length;
}

/** Whether `entries` name exactly the keys of `held`. */
function sameNames(held: ReadonlyMap<string, unknown>, entries: readonly [string, unknown][]): boolean {
  return held.size === entries.length && entries.every(([n]) => held.has(n));
}

/** The entries whose tensor is not the very object `bound` holds under its name. */
function unbound(
  bound: ReadonlyMap<string, WeakRef<Tensor>>,
  entries: readonly [string, Tensor][],
): [string, Tensor][] {
  return entries.filter(([n, t]) => bound.get(n)!.deref() !== t);
}

/** A decoder session run through ONNX Runtime's C API with IoBinding (see the module comment). */
export class NativeDecoderSession implements DecoderSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly ragged: boolean;
  /** The model's inputs and outputs as onnxruntime-node describes them. */
  readonly inputMetadata: readonly InferenceSession.ValueMetadata[];
  readonly outputMetadata: readonly InferenceSession.ValueMetadata[];
  /**
   * Bytes of the projections' weights as BlockQuantMatMul packed them (0 without it): what a
   * decode step reads of them.
   */
  readonly packedWeightBytes: number;
  /** What runs attention: ortserve's kernel (the rewritten graph) or ONNX Runtime's GroupQueryAttention. */
  readonly attention: "ortserve" | "onnxruntime";
  private readonly raw: RawSession;
  private readonly reuseLogits: boolean;
  /** With reuseLogits, where the logits go: each run's are a view valid until the next run. */
  private reused = new Float32Array(0);
  /** Runs started and not yet settled: the kept binding is only changed when none is. */
  private inFlight = 0;
  /** What the kept binding holds, by input and output name, after the last kept run that succeeded. */
  private kept: KeptBinding | undefined;
  /** Fed for inputs a run does not give (the rewritten graph's own; the same objects every run). */
  private readonly defaults: [string, Tensor][];

  constructor(
    raw: RawSession,
    reuseLogits = false,
    defaults: Record<string, Tensor> = {},
    attention: "ortserve" | "onnxruntime" = "onnxruntime",
  ) {
    this.raw = raw;
    this.attention = attention;
    this.reuseLogits = reuseLogits;
    this.inputMetadata = metadata(raw.inputMetadata);
    this.outputMetadata = metadata(raw.outputMetadata);
    this.packedWeightBytes = raw.packedWeightBytes;
    this.inputNames = this.inputMetadata.map((m) => m.name);
    this.outputNames = this.outputMetadata.map((m) => m.name);
    this.ragged = this.inputNames.includes(TOKEN_ROWS);
    this.defaults = Object.entries(defaults).filter(([name]) => this.inputNames.includes(name));
  }

  /**
   * The dims a fetch will have, when the decoder contract tells them before the run: logits
   * [batch, k, vocab] with k = num_logits_to_keep (0 = every position, and at most the sequence
   * length) and a static vocab. Undefined otherwise.
   */
  private predictDims(name: string, feeds: Record<string, Tensor>): number[] | undefined {
    const meta = this.outputMetadata.find((m) => m.name === name);
    const ids = feeds.input_ids;
    const keep = feeds.num_logits_to_keep;
    if (name !== "logits" || !meta?.isTensor || meta.type !== "float32" || meta.shape.length !== 3) return;
    const vocab = meta.shape[2];
    if (typeof vocab !== "number" || ids?.dims.length !== 2 || keep?.type !== "int64" || keep.size !== 1)
      return;
    const [batch, seq] = ids.dims as [number, number];
    const k = Number((keep.data as BigInt64Array)[0]);
    return [batch, k > 0 ? Math.min(k, seq) : seq, vocab];
  }

  /** A float32 tensor of `dims` for a null fetch: its own, or a view of the reused buffer. */
  private outputTensor(dims: number[]): Tensor {
    const n = dims.reduce((a, b) => a * b, 1);
    if (!this.reuseLogits || n > REUSED_MAX_FLOATS) return new Tensor("float32", new Float32Array(n), dims);
    if (this.reused.length < n) this.reused = new Float32Array(n);
    return new Tensor("float32", this.reused.subarray(0, n), dims);
  }

  inputType(name: string): Tensor.Type | undefined {
    const input = this.inputMetadata.find((m) => m.name === name);
    return input?.isTensor ? input.type : undefined;
  }

  run(
    inputs: Record<string, Tensor>,
    outputs: Record<string, Tensor | null>,
    cache?: CacheTensors,
  ): Promise<Record<string, Tensor>> {
    return cache ? this.runWithCache(inputs, outputs, cache) : this.runFetches(inputs, outputs);
  }

  /**
   * A run with every tensor given in `feeds` and `fetches`. `step`: what runWithCache's shortcut
   * may rely on if this run binds through the kept binding.
   */
  private async runFetches(
    feeds: Record<string, Tensor>,
    fetches: Record<string, Tensor | null>,
    step?: StepBinding,
  ): Promise<Record<string, Tensor>> {
    const { given, fetched } = this.allocateFetches(feeds, fetches);
    // The kept binding needs every output pre-allocated and no other run using it.
    if (KEEP_BINDING && this.inFlight === 0 && fetched.every(([, t]) => t !== undefined)) {
      await this.runKept(feeds, fetched as [string, Tensor][], step);
      return given;
    }
    const inputs = this.feedEntries(feeds).map(([name, t]) => rawTensor(name, t));
    const outputs = fetched.map(([name, t]) => (t ? rawTensor(name, t) : { name }));
    this.inFlight++;
    let results: Awaited<ReturnType<RawSession["run"]>>;
    try {
      results = await this.raw.run(inputs, outputs);
    } finally {
      this.inFlight--;
    }
    const out: Record<string, Tensor> = {};
    outputs.forEach(({ name }, i) => {
      const r = results[i];
      if (!r) out[name] = given[name]!;
      else {
        const type = TENSOR_TYPES.get(r.type);
        if (type === undefined) throw new Error(`${name}: unsupported output type ${r.type}`);
        out[name] = new Tensor(
          type,
          new ARRAYS[r.type]!(r.buffer) as Tensor.DataTypeMap[typeof type],
          r.dims,
        );
      }
    });
    return out;
  }

  /** The fetches with a tensor for each null whose shape the feeds tell (undefined for the rest). */
  private allocateFetches(
    feeds: Record<string, Tensor>,
    fetches: Record<string, Tensor | null>,
  ): { given: Record<string, Tensor>; fetched: [string, Tensor | undefined][] } {
    const given: Record<string, Tensor> = {};
    const fetched = Object.entries(fetches).map(([name, t]): [string, Tensor | undefined] => {
      if (t === null) {
        const dims = this.predictDims(name, feeds);
        if (!dims) return [name, undefined];
        t = this.outputTensor(dims);
      }
      given[name] = t;
      return [name, t];
    });
    return { given, fetched };
  }

  /**
   * run() for a forward pass whose cache tensors come as one binding object (KvSlots.bind's: the
   * same object while its rows and buffers stay), with the step's own `feeds` and `fetches`.
   * While `cache` is the object the kept binding last bound with the same step names, only the
   * step's few entries are compared with what is bound: the 2 x layers cache entries are neither
   * spread into one feeds object nor diffed again (~50 µs a step on 60 of them, measured).
   */
  private async runWithCache(
    feeds: Record<string, Tensor>,
    fetches: Record<string, Tensor | null>,
    cache: CacheTensors,
  ): Promise<Record<string, Tensor>> {
    const held = this.kept;
    if (
      KEEP_BINDING &&
      this.inFlight === 0 &&
      held?.step?.cache === cache &&
      sameKeys(held.step.feeds, feeds) &&
      sameKeys(held.step.fetches, fetches)
    ) {
      const { given, fetched } = this.allocateFetches(feeds, fetches);
      if (fetched.every(([, t]) => t !== undefined)) {
        const outputs = fetched as [string, Tensor][];
        await this.runBinding(
          held,
          unbound(held.inputs, Object.entries(feeds)),
          unbound(held.outputs, outputs),
          true,
        );
        return given;
      }
    }
    return this.runFetches(
      { ...cache.feeds, ...feeds },
      { ...cache.fetches, ...fetches },
      {
        cache,
        feeds: Object.keys(feeds),
        fetches: Object.keys(fetches),
      },
    );
  }

  /** The feeds and the defaults of inputs they do not give (no copy of the feeds object per run). */
  private feedEntries(feeds: Record<string, Tensor>): [string, Tensor][] {
    const entries = Object.entries(feeds);
    for (const entry of this.defaults) if (!(entry[0] in feeds)) entries.push(entry);
    return entries;
  }

  /**
   * A run over the session's kept binding: only tensors that are not the very objects bound last
   * time cross into the addon. A decode step's KV tensors (KvSlots reuses them while its rows and
   * buffers stay) are bound once, not 2 x layers times a step. A tensor object always covers the
   * same memory, so an unchanged object means an unchanged binding; a name set that changes, or a
   * failed run, starts the binding over.
   */
  private async runKept(
    feeds: Record<string, Tensor>,
    fetched: [string, Tensor][],
    step?: StepBinding,
  ): Promise<void> {
    const given = this.feedEntries(feeds);
    // The same names as the kept binding holds: update it; any other set: start it over.
    const held = this.kept;
    const update = held !== undefined && sameNames(held.inputs, given) && sameNames(held.outputs, fetched);
    const kept: KeptBinding = update ? held : { inputs: new Map(), outputs: new Map() };
    // What runWithCache's shortcut may rely on after this run (nothing, unless it is its run).
    kept.step = step;
    await this.runBinding(
      kept,
      update ? unbound(kept.inputs, given) : given,
      update ? unbound(kept.outputs, fetched) : fetched,
      update,
    );
  }

  /** Binds what changed into `kept` (updated, or started over) and runs; kept again on success. */
  private async runBinding(
    kept: KeptBinding,
    changedInputs: [string, Tensor][],
    changedOutputs: [string, Tensor][],
    update: boolean,
  ): Promise<void> {
    this.kept = undefined;
    this.inFlight++;
    try {
      await this.raw.run(
        changedInputs.map(([n, t]) => rawTensor(n, t)),
        changedOutputs.map(([n, t]) => rawTensor(n, t)),
        update ? BindingMode.KeptUpdate : BindingMode.KeptFresh,
      );
    } finally {
      this.inFlight--;
    }
    // Weak: a tensor no caller holds any more must not keep its memory alive here; a collected
    // one simply differs from whatever the caller gives next.
    for (const [n, t] of changedInputs) kept.inputs.set(n, new WeakRef(t));
    for (const [n, t] of changedOutputs) kept.outputs.set(n, new WeakRef(t));
    this.kept = kept;
  }

  async release(): Promise<void> {
    this.raw.release();
  }
}

/** onnxruntime-node's own ONNX Runtime library: the addon runs the very same runtime. */
function runtimeLibrary(): string {
  const require = createRequire(import.meta.url);
  const bin = join(
    dirname(require.resolve("onnxruntime-node")),
    "..",
    "bin",
    "napi-v6",
    process.platform,
    process.arch,
  );
  const name = readdirSync(bin).find((f) => /^(lib)?onnxruntime\.(so\.1|\d[\d.]*\.dylib|dylib)$/.test(f));
  if (!name) throw new Error(`no ONNX Runtime library in ${bin}`);
  return join(bin, name);
}

const ADDON = "../../../native/build/Release/ortserve_session.node";

export interface NativeSessions {
  /** ONNX Runtime's version, as the loaded library reports it. */
  readonly version: string;
  /**
   * Whether sessions replace MatMulNBits with ortserve's BlockQuantMatMul (this CPU has AVX-512
   * VNNI or AVX2 and ORTSERVE_BLOCK_QUANT_MATMUL is not 0).
   */
  readonly blockQuantMatMul: boolean;
  /** BlockQuantMatMul's kernels this CPU runs, fastest first ("avx512-vnni", "avx2", "scalar"). */
  readonly blockQuantMatMulKernels: readonly string[];
  /**
   * Runs BlockQuantMatMul with the named kernel, for the whole process (all give the same floats:
   * tests hold them to each other, benchmarks measure a slower CPU's kernel on a faster one).
   * Returns the kernel in use; a name this CPU does not run changes nothing.
   */
  setBlockQuantMatMulKernel(name: string): string;
  /** The kernel BlockQuantMatMul runs now. */
  blockQuantMatMulKernel(): string;
  create(modelPath: string, options: NativeSessionOptions): NativeDecoderSession;
  /**
   * Keeps transparent huge pages away from the array's memory (Linux; undefined elsewhere or when
   * refused), so memory reserved and left unwritten stays uncommitted on hosts that set them to
   * "always". Returns the advised [start, end) addresses.
   */
  keepSmallPages(array: ArrayBufferView): [number, number] | undefined;
}

function load(): NativeSessions | undefined {
  if (!runtimeFlags.nativeSession) return undefined;
  let addon: SessionAddon;
  try {
    addon = createRequire(import.meta.url)(ADDON) as SessionAddon;
  } catch (error) {
    // Not built is the normal fallback; a build that does not load deserves a word.
    if ((error as NodeJS.ErrnoException).code !== "MODULE_NOT_FOUND")
      process.emitWarning(`ortserve: native session failed to load, using onnxruntime-node's: ${error}`);
    return undefined;
  }
  let version: string;
  try {
    version = addon.loadRuntime(runtimeLibrary());
  } catch (error) {
    process.emitWarning(
      `ortserve: native session cannot load ONNX Runtime, using onnxruntime-node's: ${error}`,
    );
    return undefined;
  }
  // "0" keeps MatMulNBits; a kernel's name runs that one (to measure a slower CPU's on this one).
  const quantMatMul = addon.blockQuantMatMulAccelerated && runtimeFlags.blockQuantMatMul;
  const kernel = runtimeFlags.blockQuantMatMulKernel;
  if (quantMatMul && kernel && addon.setBlockQuantMatMulKernel(kernel) !== kernel)
    process.emitWarning(
      `ortserve: ORTSERVE_BLOCK_QUANT_MATMUL=${kernel} is not a kernel this CPU runs (${addon.blockQuantMatMulKernels.join(", ")})`,
    );
  return {
    version,
    blockQuantMatMul: quantMatMul,
    blockQuantMatMulKernels: addon.blockQuantMatMulKernels,
    setBlockQuantMatMulKernel: (name) => addon.setBlockQuantMatMulKernel(name),
    blockQuantMatMulKernel: () => addon.blockQuantMatMulKernel(),
    keepSmallPages: (array) => addon.keepSmallPages(array),
    create: (modelPath, { intraOpThreads, interOpThreads, reuseLogits, cachedAttention, kvCacheDtype }) => {
      const wanted = cachedAttention ?? runtimeFlags.cachedAttention;
      const rewritten = wanted
        ? cachedAttentionModel(modelPath, { cacheDtype: kvCacheDtype, quantMatMul })
        : undefined;
      const session = new addon.Session(
        rewritten ?? modelPath,
        intraOpThreads,
        interOpThreads,
        rewritten !== undefined,
      );
      return new NativeDecoderSession(
        session,
        reuseLogits,
        rewritten ? rewrittenInputDefaults() : {},
        rewritten ? "ortserve" : "onnxruntime",
      );
    },
  };
}

/** The native decoder session, when the addon is built and loads ONNX Runtime. */
export const nativeSessions: NativeSessions | undefined = load();
