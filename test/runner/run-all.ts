import type { Tensor } from "onnxruntime-node";
import type { DecoderSession } from "../../src/core/runner/decoder-session.ts";

/** One run of `session` fetching every output it has, each allocated by the session. */
export function runAll(
  session: DecoderSession,
  inputs: Record<string, Tensor>,
): Promise<Record<string, Tensor>> {
  return session.run(inputs, Object.fromEntries(session.outputNames.map((n) => [n, null])));
}
