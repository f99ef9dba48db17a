/**
 * onnxruntime-node's InferenceSession as a DecoderSession: the session used where the native
 * addon is not built or ORTSERVE_NATIVE_SESSION=0. Every fetched output comes back as a fresh
 * copy, the KV cache's present tensors included (KvSlots grows its buffers on demand for it).
 */
import type { InferenceSession, Tensor } from "onnxruntime-node";
import { TOKEN_ROWS } from "./attention-graph.ts";
import type { CacheTensors, DecoderSession } from "./decoder-session.ts";

export class OrtDecoderSession implements DecoderSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly ragged: boolean;
  private readonly session: InferenceSession;

  constructor(session: InferenceSession) {
    this.session = session;
    this.inputNames = session.inputNames;
    this.outputNames = session.outputNames;
    this.ragged = session.inputNames.includes(TOKEN_ROWS);
  }

  inputType(name: string): Tensor.Type | undefined {
    const input = this.session.inputMetadata.find((m) => m.name === name);
    return input?.isTensor ? input.type : undefined;
  }

  async run(
    inputs: Record<string, Tensor>,
    outputs: Record<string, Tensor | null>,
    cache?: CacheTensors,
  ): Promise<Record<string, Tensor>> {
    // onnxruntime-node reads a record without a known output name as run options: say so instead.
    const names = Object.keys(outputs);
    const unknown = names.find((n) => !this.outputNames.includes(n));
    if (unknown !== undefined) throw new Error(`run: the model has no output ${unknown}`);
    if (names.length === 0 && !cache) throw new Error("run: name at least one output");
    const out = await this.session.run(
      cache ? { ...cache.feeds, ...inputs } : inputs,
      cache ? { ...cache.fetches, ...outputs } : outputs,
    );
    return out as Record<string, Tensor>;
  }

  release(): Promise<void> {
    return this.session.release();
  }
}
