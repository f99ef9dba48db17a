/**
 * Emits the decoder-with-past graph (the Optimum / transformers.js contract):
 *   inputs  input_ids [batch, seq], attention_mask [batch, past+seq], position_ids [batch, seq],
 *           past_key_values.{i}.key/value [batch, kv_heads, past, head_dim],
 *           num_logits_to_keep (scalar, optional, default 0 = every position; k = the last k)
 *   outputs logits [batch, seq|k, vocab], present.{i}.key/value [batch, kv_heads, past+seq, head_dim]
 *
 * CPU recipe (onnxruntime-genai's: 11 nodes per layer, plus Split, MatMul and Add per projection
 * for weights with per-block offsets such as Q4_1): packed QKV and gate/up projections;
 * GroupQueryAttention on the packed QKV with its own rotary (do_rotary, cos/sin caches, fed
 * position_ids; KV heads shared without copies; seqlens from the mask); SkipSimplifiedLayerNormalization
 * fusing each residual add with the next RMSNorm. Per-node overhead dominates single-token decode at
 * this model size, so the graph is kept to as few nodes as the exact weight mapping allows.
 */
import { ACTIVATION_BLOCKS_METADATA } from "../../core/runner/epilogue-graph.ts";
import type { Hyperparameters } from "./architectures.ts";
import type { GraphBuilder } from "./onnx/graph-builder.ts";
import { OnnxDataType } from "./onnx/proto.ts";
import { type NBitsWeight, offsetMatrix, withBlockSumRows } from "./quantized-weights.ts";

const MS = "com.microsoft";
const F = OnnxDataType.FLOAT;

/** A linear layer's weight as the graph will store it. */
export type LinearWeight =
  | { kind: "nbits"; weight: NBitsWeight }
  /** Row-major [n, k] floats (PyTorch layout). */
  | { kind: "f32"; n: number; k: number; values: Float32Array }
  /** Row-major [n, k] IEEE half or bfloat16 bits, kept in 16 bits (a float16 or bfloat16 file's). */
  | { kind: "half"; format: HalfFormat; n: number; k: number; values: Uint16Array };

export type HalfFormat = "f16" | "bf16";

const halfType = (format: HalfFormat) => (format === "f16" ? OnnxDataType.FLOAT16 : OnnxDataType.BFLOAT16);

/** Supplies weights as the graph needs them, so only one layer's tensors are in memory at a time. */
export interface WeightProvider {
  /** Token embedding rows [vocab, hidden]: quantized 8-bit blocks, or floats. */
  embedding(): LinearWeight;
  /** The output projection; `undefined` when tied to the embedding. */
  lmHead(): LinearWeight | undefined;
  /** Packed Q, K, V rows (Q/K already in half-rotation RoPE order). */
  qkv(layer: number): LinearWeight;
  /** Packed Q, K, V biases in the same order, for architectures that have them. */
  qkvBias(layer: number): Float32Array | undefined;
  /** Per-head RMSNorm weights [head_dim] for Q and K, for architectures that have them. */
  qkNorm(layer: number): { q: Float32Array; k: Float32Array } | undefined;
  attnOutput(layer: number): LinearWeight;
  /** Packed gate and up rows. */
  gateUp(layer: number): LinearWeight;
  down(layer: number): LinearWeight;
  norm(name: "attn" | "ffn", layer: number): Float32Array;
  /** The norms after attention and after the MLP, for architectures with sandwich norms (gemma3). */
  postNorm(name: "attn" | "ffn", layer: number): Float32Array;
  outputNorm(): Float32Array;
}

/**
 * RoPE tables computed the way llama.cpp does (float32, theta advanced by repeated multiplication,
 * each pair's angle divided by its frequency factor when the model has them).
 */
export function ropeCaches(
  maxPositions: number,
  headDim: number,
  theta: number,
  freqFactors?: Float32Array,
): [Float32Array, Float32Array] {
  const half = headDim / 2;
  const cos = new Float32Array(maxPositions * half);
  const sin = new Float32Array(maxPositions * half);
  const thetaScale = Math.fround(theta ** (-2 / headDim));
  for (let p = 0; p < maxPositions; p++) {
    let t = Math.fround(p);
    for (let i = 0; i < half; i++) {
      const angle = freqFactors ? Math.fround(t / freqFactors[i]!) : t;
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
      t = Math.fround(t * thetaScale);
    }
  }
  return [cos, sin];
}

function transpose<T extends Float32Array | Uint16Array>(values: T, rows: number, cols: number): T {
  const out = new (values.constructor as new (n: number) => T)(values.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = values[r * cols + c]!;
  return out;
}

/**
 * GELU (tanh form) as llama.cpp's CPU backend computes it for GeGLU: the input rounded to
 * binary16, looked up in a table of gelu(x) rounded to binary16 (ggml_vec_geglu_f32 with
 * GGML_GELU_FP16), the input itself at 10 and above, 0 at -10 and below. The table's entries are
 * computed here in the graph with ggml_gelu_f32's operation order: 0.5x(1 + tanh(sqrt(2/pi) x
 * (1 + 0.044715 x x))), so every entry is ggml's (test/convert/gelu-table.test.ts). The exact
 * GELU differs from this by binary16 rounding (~5e-4 relative).
 * The native session fuses these nodes, the Split before and the Mul by up after into one GeGLU
 * epilogue (core/runner/epilogue-graph.ts fuseGeGlu): keep the two in step.
 */
export function tanhGeluFp16Table(g: GraphBuilder, prefix: string, x: string): string {
  const F16 = OnnxDataType.FLOAT16;
  const c = (v: number) => g.scalar(Math.fround(v), F);
  const viaHalf = (v: string, name: string) =>
    g.op("Cast", [g.op("Cast", [v], `${name}_f16`, { to: F16 })], name, { to: F });
  // From -10 down the table's entry is gelu(-10), 0 in float (tanh saturates): clamping there
  // also keeps inputs beyond binary16's range from becoming infinities and NaN.
  const xh = viaHalf(g.op("Max", [x, c(-10)], `${prefix}.gelu_clamped`), `${prefix}.gelu_in`);
  const mul = (a: string, b: string, name: string) => g.op("Mul", [a, b], `${prefix}.gelu_${name}`);
  const add1 = (a: string, name: string) => g.op("Add", [a, c(1)], `${prefix}.gelu_${name}`);
  const cubic = add1(mul(mul(xh, c(0.044715), "ax"), xh, "axx"), "inner");
  // tanh in double, rounded once to float: the C library's tanhf to its last bit, where ONNX
  // Runtime's float Tanh is off by a few and 1 + tanh cancels them up into binary16 steps.
  const arg = g.op(
    "Cast",
    [mul(mul(xh, c(0.7978845608028654), "sx"), cubic, "arg")],
    `${prefix}.gelu_arg_f64`,
    {
      to: OnnxDataType.DOUBLE,
    },
  );
  const t = g.op("Cast", [g.op("Tanh", [arg], `${prefix}.gelu_tanh_f64`)], `${prefix}.gelu_tanh`, { to: F });
  const gelu = mul(mul(xh, c(0.5), "half"), add1(t, "one_plus"), "value");
  const table = viaHalf(gelu, `${prefix}.gelu_table`);
  const below = g.op("Less", [x, c(10)], `${prefix}.gelu_below`);
  return g.op("Where", [below, table, x], `${prefix}.gelu`);
}

class DecoderGraphEmitter {
  private readonly g: GraphBuilder;
  private readonly hp: Hyperparameters;
  private readonly accuracyLevel: number;
  /** Quantized weight initializers whose activations go in blocks other than 32 (ACTIVATION_BLOCKS_METADATA). */
  private readonly activationBlocks: Record<string, number> = {};

  constructor(g: GraphBuilder, hp: Hyperparameters, accuracyLevel: number) {
    this.g = g;
    this.hp = hp;
    this.accuracyLevel = accuracyLevel;
  }

  /**
   * Records the activation block `w` is multiplied with under its quant weight initializer's name,
   * which MatMulNBits has no attribute for; the model's metadata carries the record to the native
   * kernel (core/runner/epilogue-graph.ts). Returns the name.
   */
  private withActivationBlock(w: NBitsWeight, initializer: string): string {
    if (w.activationBlock) {
      this.activationBlocks[initializer] = w.activationBlock;
      this.g.metadata[ACTIVATION_BLOCKS_METADATA] = JSON.stringify(this.activationBlocks);
    }
    return initializer;
  }

  /** Stores a linear weight; returns a function applying it to an input value. */
  linear(name: string, w: LinearWeight): (input: string) => string {
    const g = this.g;
    if (w.kind === "f32") {
      const b = g.initializer(`${name}.weight_t`, F, [w.k, w.n], transpose(w.values, w.n, w.k));
      return (input) => g.op("MatMul", [input, b], `${name}.out`);
    }
    if (w.kind === "half") {
      // ONNX's MatMul takes one type for both sides: the 16-bit weights go through a Cast, which
      // ortserve's native session replaces with its 16-bit kernel (runner/epilogue-graph.ts) and
      // ONNX Runtime alone folds into float32 at load.
      const b = g.initializer(
        `${name}.weight_t`,
        halfType(w.format),
        [w.k, w.n],
        transpose(w.values, w.n, w.k),
      );
      const widened = g.op("Cast", [b], `${name}.weight_float`, { to: F });
      return (input) => g.op("MatMul", [input, widened], `${name}.out`);
    }
    const q = w.weight;
    const blocks = q.k / q.blockSize;
    const attrs = {
      K: q.k,
      N: q.n,
      bits: q.bits,
      block_size: q.blockSize,
      accuracy_level: this.accuracyLevel,
    };
    const stored = (weight: NBitsWeight, suffix: string) => [
      this.withActivationBlock(
        q,
        g.initializer(
          `${name}.qweight${suffix}`,
          OnnxDataType.UINT8,
          [weight.n, blocks, (weight.blockSize * weight.bits) / 8],
          weight.data,
        ),
      ),
      g.initializer(`${name}.scales${suffix}`, F, [weight.n, blocks], weight.scales),
    ];
    if (!q.offsets) {
      const [data, scales] = stored(q, "");
      return (input) => g.op("MatMulNBits", [input, data!, scales!], `${name}.out`, attrs, MS);
    }
    // Per-block offsets (Q4_1): y = A x W + blockSums(A) x C. The block sums come out of the same
    // MatMulNBits as extra rows, so each projection costs MatMulNBits, Split, MatMul, Add.
    const [data, scales] = stored(withBlockSumRows(q), "_with_sums");
    const offsets = g.initializer(`${name}.block_offsets`, F, [blocks, q.n], offsetMatrix(q));
    return (input) => {
      const both = g.op(
        "MatMulNBits",
        [input, data!, scales!],
        `${name}.out_and_sums`,
        { ...attrs, N: q.n + blocks },
        MS,
      );
      const [y, sums] = g.node(
        "Split",
        [both, g.int64s([q.n, blocks])],
        [`${name}.out`, `${name}.block_sums`],
        { axis: -1 },
      );
      const corr = g.op("MatMul", [sums!, offsets], `${name}.offset`);
      return g.op("Add", [y!, corr], `${name}.sum`);
    };
  }

  /** Embedding lookup; for 8-bit blocks the gathered rows are dequantized in the graph. */
  embed(w: LinearWeight, ids: string): string {
    const g = this.g;
    if (w.kind === "half") {
      // Gathered in 16 bits, the rows cast to float: the table stays 2 bytes a weight.
      const table = g.initializer("model.embed_tokens.weight", halfType(w.format), [w.n, w.k], w.values);
      return g.op("Cast", [g.op("Gather", [table, ids], "embeds.half")], "embeds", { to: F });
    }
    if (w.kind === "f32") {
      const table = g.initializer("model.embed_tokens.weight", F, [w.n, w.k], w.values);
      return g.op("Gather", [table, ids], "embeds");
    }
    const q = w.weight;
    if (q.bits !== 8) throw new Error("embedding tables are stored as 8-bit blocks");
    // The initializers linear("embed_tokens") stored (with block-sum rows when there are offsets;
    // token ids never reach those rows).
    const suffix = q.offsets ? "_with_sums" : "";
    const rows = g.op("Gather", [`embed_tokens.qweight${suffix}`, ids], "embed.rows");
    const centered = g.op(
      "Sub",
      [g.op("Cast", [rows], "embed.float", { to: F }), g.scalar(128, F)],
      "embed.centered",
    );
    const scales = g.op(
      "Unsqueeze",
      [g.op("Gather", [`embed_tokens.scales${suffix}`, ids], "embed.scales"), g.int64s([-1])],
      "embed.scales4d",
    );
    let blocks = g.op("Mul", [centered, scales], "embed.blocks");
    if (q.offsets) {
      // block_offsets is [blocks, n]: gather columns, then put the blocks last.
      const columns = g.op("Gather", ["embed_tokens.block_offsets", ids], "embed.offset_columns", {
        axis: 1,
      });
      const offsets = g.op(
        "Unsqueeze",
        [g.op("Transpose", [columns], "embed.offsets", { perm: [1, 2, 0] }), g.int64s([-1])],
        "embed.offsets4d",
      );
      blocks = g.op("Add", [blocks, offsets], "embed.offset_blocks");
    }
    return g.op("Reshape", [blocks, g.int64s([0, 0, -1])], "embeds");
  }

  emit(weights: WeightProvider, onLayer?: (layer: number) => void): void {
    const { g, hp } = this;
    const I64 = OnnxDataType.INT64;
    const ids = g.input("input_ids", I64, ["batch_size", "sequence_length"]);
    const mask = g.input("attention_mask", I64, ["batch_size", "total_sequence_length"]);
    const positions = g.input("position_ids", I64, ["batch_size", "sequence_length"]);
    const kvShape = ["batch_size", hp.kvHeads, "past_sequence_length", hp.headDim];
    const presentShape = ["batch_size", hp.kvHeads, "total_sequence_length", hp.headDim];
    for (let i = 0; i < hp.layers; i++) {
      g.input(`past_key_values.${i}.key`, F, kvShape);
      g.input(`past_key_values.${i}.value`, F, kvShape);
    }
    // transformers.js feeds this input whenever a model declares it (1 while generating, 0 for a full
    // forward). ONNX Runtime's Node binding cannot override an initializer-backed optional input, so it
    // is a plain required input.
    g.input("num_logits_to_keep", I64, []);

    // Attention bookkeeping shared by every layer: valid length per row and the total length.
    const maskSum = g.op("ReduceSum", [mask, g.int64s([1])], "mask_sum", { keepdims: 0 });
    const seqlensK = g.op("Cast", [g.op("Sub", [maskSum, g.scalar(1, I64)], "seqlens_k_i64")], "seqlens_k", {
      to: OnnxDataType.INT32,
    });
    const totalLen = g.op(
      "Cast",
      [g.op("Gather", [g.op("Shape", [mask], "mask_shape"), g.scalar(1, I64)], "total_len_i64")],
      "total_seq_len",
      { to: OnnxDataType.INT32 },
    );
    const rotary = (prefix: string, theta: number) => {
      const [cos, sin] = ropeCaches(hp.contextLength, hp.headDim, theta, hp.ropeFreqFactors);
      return {
        cos: g.initializer(`${prefix}.cos_cache`, F, [hp.contextLength, hp.headDim / 2], cos),
        sin: g.initializer(`${prefix}.sin_cache`, F, [hp.contextLength, hp.headDim / 2], sin),
      };
    };
    const globalRotary = rotary("rope", hp.ropeTheta);
    // Sliding-window layers rotate with their own base (gemma3's 10,000 beside a global 1,000,000).
    const window = hp.slidingWindow;
    const localRotary = window && rotary("rope.local", window.ropeTheta);

    const embedding = weights.embedding();
    const lmHeadWeight = weights.lmHead();
    let embedApply: ((x: string) => string) | undefined;
    if (embedding.kind === "nbits") {
      // Stored once: the embedding gathers rows of the same initializers the tied lm_head multiplies by.
      embedApply = this.linear("embed_tokens", embedding);
    }
    let residual = this.embed(embedding, ids);
    // Gemma scales the embeddings by sqrt(hidden) (llama.cpp: in float32, sqrtf(n_embd)).
    if (hp.arch.gemma)
      residual = g.op("Mul", [residual, g.scalar(Math.fround(Math.sqrt(hp.hidden)), F)], "embeds_scaled");
    let normed = g.op(
      "SimplifiedLayerNormalization",
      [residual, g.initializer("layers.0.attn_norm", F, [hp.hidden], weights.norm("attn", 0))],
      "layers.0.attn_normed",
      {
        axis: -1,
        epsilon: { float: hp.rmsEps },
        stash_type: 1,
      },
    );

    for (let l = 0; l < hp.layers; l++) {
      const p = `layers.${l}`;
      const qkv = this.qkNormed(
        p,
        this.qkvBiased(p, this.linear(`${p}.qkv_proj`, weights.qkv(l))(normed), weights.qkvBias(l)),
        weights.qkNorm(l),
      );
      // GroupQueryAttention rotates Q and K itself, at the positions fed in position_ids (input 9), so
      // chunked prefills and ragged batched rows rotate exactly as a separate RotaryEmbedding would.
      const local = window?.local[l] === true;
      const { cos: cosCache, sin: sinCache } = local ? localRotary! : globalRotary;
      const [attn] = g.node(
        "GroupQueryAttention",
        [
          qkv,
          "",
          "",
          `past_key_values.${l}.key`,
          `past_key_values.${l}.value`,
          seqlensK,
          totalLen,
          cosCache,
          sinCache,
          positions,
        ],
        [`${p}.attn`, `present.${l}.key`, `present.${l}.value`],
        {
          num_heads: hp.heads,
          kv_num_heads: hp.kvHeads,
          scale: { float: hp.attentionScale },
          do_rotary: 1,
          rotary_interleaved: 0,
          // ONNX Runtime's window, like llama.cpp's n_swa, counts the token's own position.
          local_window_size: local ? window!.window : -1,
        },
        MS,
      );
      g.output(`present.${l}.key`, F, presentShape);
      g.output(`present.${l}.value`, F, presentShape);
      const attnOut = this.postNormed(
        `${p}.attn_post`,
        this.linear(`${p}.o_proj`, weights.attnOutput(l))(attn!),
        weights,
        "attn",
        l,
      );

      const [ffnNormed, , , afterAttn] = g.node(
        "SkipSimplifiedLayerNormalization",
        [residual, attnOut, g.initializer(`${p}.ffn_norm`, F, [hp.hidden], weights.norm("ffn", l))],
        [`${p}.ffn_normed`, "", "", `${p}.resid_attn`],
        { epsilon: { float: hp.rmsEps } },
        MS,
      );
      residual = afterAttn!;
      const gateUp = this.linear(`${p}.gate_up_proj`, weights.gateUp(l))(ffnNormed!);
      const [gate, up] = g.node("Split", [gateUp, g.int64s([hp.ffn, hp.ffn])], [`${p}.gate`, `${p}.up`], {
        axis: -1,
      });
      const activated = hp.arch.gemma
        ? tanhGeluFp16Table(g, p, gate!)
        : g.op("Mul", [gate!, g.op("Sigmoid", [gate!], `${p}.gate_sigmoid`)], `${p}.silu`);
      const down = this.postNormed(
        `${p}.ffn_post`,
        this.linear(`${p}.down_proj`, weights.down(l))(g.op("Mul", [activated, up!], `${p}.act`)),
        weights,
        "ffn",
        l,
      );

      const last = l === hp.layers - 1;
      const nextNorm = last ? weights.outputNorm() : weights.norm("attn", l + 1);
      const nextNormName = last ? "norm" : `layers.${l + 1}.attn_norm`;
      const [nextNormed, , , afterFfn] = g.node(
        "SkipSimplifiedLayerNormalization",
        [residual, down, g.initializer(nextNormName, F, [hp.hidden], nextNorm)],
        [last ? "final_normed" : `layers.${l + 1}.attn_normed`, "", "", `${p}.resid_ffn`],
        { epsilon: { float: hp.rmsEps } },
        MS,
      );
      normed = nextNormed!;
      residual = afterFfn!;
      onLayer?.(l);
    }

    // Only the positions the caller needs go through the vocabulary projection.
    const start = g.op("Neg", ["num_logits_to_keep"], "logits_start");
    const kept = g.op(
      "Slice",
      [
        normed,
        g.op("Unsqueeze", [start, g.int64s([0])], "logits_start_1d"),
        g.int64s([Number.MAX_SAFE_INTEGER]),
        g.int64s([1]),
      ],
      "kept_hidden",
    );
    const head = lmHeadWeight
      ? this.linear("lm_head", lmHeadWeight)
      : (embedApply ?? this.tiedFloatHead(embedding.kind === "half"));
    g.node("Identity", [this.softcapped(head(kept))], ["logits"]);
    g.output("logits", F, ["batch_size", "logits_length", hp.vocab]);
  }

  /** An RMSNorm after a sublayer, for architectures with sandwich norms; else the value as it is. */
  private postNormed(
    prefix: string,
    x: string,
    weights: WeightProvider,
    which: "attn" | "ffn",
    layer: number,
  ): string {
    const { g, hp } = this;
    if (!hp.arch.gemma) return x;
    return g.op(
      "SimplifiedLayerNormalization",
      [x, g.initializer(`${prefix}_norm`, F, [hp.hidden], weights.postNorm(which, layer))],
      `${prefix}_normed`,
      { axis: -1, epsilon: { float: hp.rmsEps }, stash_type: 1 },
    );
  }

  /** cap tanh(logits / cap), when the model caps its logits. */
  private softcapped(logits: string): string {
    const { g, hp } = this;
    const cap = hp.finalLogitSoftcap;
    if (!cap) return logits;
    const t = g.op(
      "Tanh",
      [g.op("Mul", [logits, g.scalar(Math.fround(1 / cap), F)], "logits_scaled")],
      "logits_tanh",
    );
    return g.op("Mul", [t, g.scalar(cap, F)], "logits_capped");
  }

  private qkvBiased(prefix: string, qkv: string, bias: Float32Array | undefined): string {
    if (!bias) return qkv;
    const g = this.g;
    return g.op(
      "Add",
      [qkv, g.initializer(`${prefix}.qkv_bias`, F, [bias.length], bias)],
      `${prefix}.qkv_biased`,
    );
  }

  /**
   * Per-head RMSNorm of Q and K (before GroupQueryAttention rotates them), as llama.cpp applies it:
   * each head's head_dim values normalized on their own, scaled by one shared weight.
   */
  private qkNormed(
    prefix: string,
    qkv: string,
    norms: { q: Float32Array; k: Float32Array } | undefined,
  ): string {
    if (!norms) return qkv;
    const { g, hp } = this;
    const qDim = hp.heads * hp.headDim;
    const kvDim = hp.kvHeads * hp.headDim;
    const [q, k, v] = g.node(
      "Split",
      [qkv, g.int64s([qDim, kvDim, kvDim])],
      [`${prefix}.q_raw`, `${prefix}.k_raw`, `${prefix}.v`],
      { axis: -1 },
    );
    const perHead = (x: string, weight: Float32Array, name: string) => {
      const heads = g.op("Reshape", [x, g.int64s([0, 0, -1, hp.headDim])], `${prefix}.${name}_heads`);
      const normed = g.op(
        "SimplifiedLayerNormalization",
        [heads, g.initializer(`${prefix}.${name}_norm`, F, [hp.headDim], weight)],
        `${prefix}.${name}_heads_normed`,
        { axis: -1, epsilon: { float: hp.rmsEps }, stash_type: 1 },
      );
      return g.op("Reshape", [normed, g.int64s([0, 0, -1])], `${prefix}.${name}_normed`);
    };
    return g.op(
      "Concat",
      [perHead(q!, norms.q, "q"), perHead(k!, norms.k, "k"), v!],
      `${prefix}.qkv_normed`,
      { axis: -1 },
    );
  }

  /** Tied float head: logits = h x E^T; the transpose of the initializer is folded at session load. */
  private tiedFloatHead(half: boolean): (x: string) => string {
    const g = this.g;
    const t = g.op("Transpose", ["model.embed_tokens.weight"], "embed_tokens_t", { perm: [1, 0] });
    // A 16-bit table: cast as linear() casts 16-bit weights (the native session multiplies the
    // table in its 16 bits, runner/epilogue-graph.ts).
    const b = half ? g.op("Cast", [t], "embed_tokens_t_float", { to: F }) : t;
    return (x) => g.op("MatMul", [x, b], "lm_head.out");
  }
}

export interface DecoderGraphOptions {
  /**
   * MatMulNBits accuracy_level: 4 quantizes activations to int8 per block (fast integer kernels, the
   * way llama.cpp multiplies Q4_1 by Q8_1); 0 keeps fp32 activations (slow; used to check that the
   * weight mapping itself is exact).
   */
  accuracyLevel?: 0 | 4;
  onLayer?: (layer: number) => void;
}

export function emitDecoderGraph(
  g: GraphBuilder,
  hp: Hyperparameters,
  weights: WeightProvider,
  opts: DecoderGraphOptions = {},
): void {
  new DecoderGraphEmitter(g, hp, opts.accuracyLevel ?? 4).emit(weights, opts.onLayer);
}
