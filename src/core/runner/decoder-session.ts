/**
 * What the batch runner, the KV cache and the engine need of a decoder session, and nothing
 * more: its input and output names, the element type of an input, whether it takes ragged
 * tokens, and one forward pass with every output named. Two sessions implement it: ortserve's
 * native one (native-session.ts) and OrtDecoderSession over onnxruntime-node's
 * (ort-decoder-session.ts, the path without a compiler).
 */
import type { Tensor } from "onnxruntime-node";

/** The KV cache's tensors for a pass: its past feeds and present fetches, bound over the same memory. */
export interface CacheTensors {
  feeds: Record<string, Tensor>;
  fetches: Record<string, Tensor>;
}

export interface DecoderSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  /** The session takes ragged tokens (`token_rows`): any tokens per row in one pass. */
  readonly ragged: boolean;
  /** The element type of a tensor input; undefined for a name that is not one. */
  inputType(name: string): Tensor.Type | undefined;
  /**
   * One forward pass. `inputs` are fed; `outputs` names every output fetched: a tensor given is
   * written in place and returned as itself, a null one is allocated by the session. `cache`,
   * the KV cache's tensors (KvSlots.bind's object, the same one while its rows and buffers
   * stay), is fed and fetched beside them. Resolves to the outputs named, by name.
   */
  run(
    inputs: Record<string, Tensor>,
    outputs: Record<string, Tensor | null>,
    cache?: CacheTensors,
  ): Promise<Record<string, Tensor>>;
  release(): Promise<void>;
}
