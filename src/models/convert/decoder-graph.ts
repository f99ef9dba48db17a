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
  | { kind: "f32"; n: number; k: number; values: Float32Array };

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

function transpose(values: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(values.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = values[r * cols + c]!;
  return out;
}

class DecoderGraphEmitter {
  private readonly g: GraphBuilder;
  private readonly hp: Hyperparameters;
  private readonly accuracyLevel: number;

  constructor(g: GraphBuilder, hp: Hyperparameters, accuracyLevel: number) {
    this.g = g;
    this.hp = hp;
    this.accuracyLevel = accuracyLevel;
  }

  /** Stores a linear weight; returns a function applying it to an input value. */
  linear(name: string, w: LinearWeight): (input: string) => string {
    const g = this.g;
    if (w.kind === "f32") {
      const b = g.initializer(`${name}.weight_t`, F, [w.k, w.n], transpose(w.values, w.n, w.k));
      return (input) => g.op("MatMul", [input, b], `${name}.out`);
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
      g.initializer(
        `${name}.qweight${suffix}`,
        OnnxDataType.UINT8,
        [weight.n, blocks, (weight.blockSize * weight.bits) / 8],
        weight.data,
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
    const [cos, sin] = ropeCaches(hp.contextLength, hp.headDim, hp.ropeTheta, hp.ropeFreqFactors);
    const cosCache = g.initializer("rope.cos_cache", F, [hp.contextLength, hp.headDim / 2], cos);
    const sinCache = g.initializer("rope.sin_cache", F, [hp.contextLength, hp.headDim / 2], sin);

    const embedding = weights.embedding();
    const lmHeadWeight = weights.lmHead();
    let embedApply: ((x: string) => string) | undefined;
    if (embedding.kind === "nbits") {
      // Stored once: the embedding gathers rows of the same initializers the tied lm_head multiplies by.
      embedApply = this.linear("embed_tokens", embedding);
    }
    let residual = this.embed(embedding, ids);
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
          scale: { float: 1 / Math.sqrt(hp.headDim) },
          do_rotary: 1,
          rotary_interleaved: 0,
          local_window_size: -1,
        },
        MS,
      );
      g.output(`present.${l}.key`, F, presentShape);
      g.output(`present.${l}.value`, F, presentShape);
      const attnOut = this.linear(`${p}.o_proj`, weights.attnOutput(l))(attn!);

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
      const silu = g.op("Mul", [gate!, g.op("Sigmoid", [gate!], `${p}.gate_sigmoid`)], `${p}.silu`);
      const down = this.linear(`${p}.down_proj`, weights.down(l))(g.op("Mul", [silu, up!], `${p}.act`));

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
    const head = lmHeadWeight ? this.linear("lm_head", lmHeadWeight) : (embedApply ?? this.tiedFloatHead());
    g.node("Identity", [head(kept)], ["logits"]);
    g.output("logits", F, ["batch_size", "logits_length", hp.vocab]);
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
  private tiedFloatHead(): (x: string) => string {
    const g = this.g;
    const t = g.op("Transpose", ["model.embed_tokens.weight"], "embed_tokens_t", { perm: [1, 0] });
    return (x) => g.op("MatMul", [x, t], "lm_head.out");
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
