/**
 * Repetition, frequency and presence penalties (vLLM's apply_penalties):
 * - repetition: every token seen in the prompt or the output has its logit
 *   divided by the penalty when positive, multiplied by it otherwise;
 * - frequency: output tokens lose `frequency * count`;
 * - presence: output tokens lose `presence` once.
 * Each touched token gets them in that order. Work is proportional to the
 * prompt's distinct ids plus the output length, never to the vocabulary.
 */

export interface Penalties {
  repetition: number;
  frequency: number;
  presence: number;
}

/** Distinct in-vocabulary prompt ids plus a per-token membership table, built once per sequence. */
export interface PromptTokens {
  ids: Int32Array;
  seen: Uint8Array;
}

export function promptTokens(promptTokenIds: readonly number[], vocabSize: number): PromptTokens {
  const seen = new Uint8Array(vocabSize);
  const ids: number[] = [];
  for (const id of promptTokenIds) {
    if (id >= 0 && id < vocabSize && seen[id] === 0) {
      seen[id] = 1;
      ids.push(id);
    }
  }
  return { ids: Int32Array.from(ids), seen };
}

function repeat(logit: number, penalty: number): number {
  return logit > 0 ? logit / penalty : logit * penalty;
}

/**
 * Applies the penalties in place. `counts` is a zeroed scratch table of
 * vocabulary size and is zeroed again on return. Ids outside the vocabulary
 * (such as placeholders) are ignored.
 */
export function applyPenalties(
  row: Float32Array,
  prompt: PromptTokens,
  outputTokenIds: readonly number[],
  counts: Int32Array,
  { repetition, frequency, presence }: Penalties,
): void {
  const vocab = counts.length;
  const useRepetition = repetition !== 1;
  if (useRepetition) {
    const ids = prompt.ids;
    for (let j = 0; j < ids.length; j++) row[ids[j]] = repeat(row[ids[j]], repetition);
  }
  for (const id of outputTokenIds) if (id >= 0 && id < vocab) counts[id]++;
  for (const id of outputTokenIds) {
    if (!(id >= 0 && id < vocab)) continue;
    const count = counts[id];
    if (count === 0) continue; // already done for an earlier occurrence
    let logit = row[id];
    if (useRepetition && prompt.seen[id] === 0) logit = repeat(logit, repetition);
    row[id] = logit - frequency * count - presence;
    counts[id] = 0;
  }
}
