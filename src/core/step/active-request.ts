/** A request while the engine holds it, and a decoding row of the batch. */
import type { EngineEvent, EngineRequest, PromptEcho, PromptTokenLogprob } from "../types.ts";
import type { BeamGroup, BeamRow } from "./beam-group.ts";
import type { Sequence } from "./sequence.ts";

export type EventSink = (event: EngineEvent) => void;

export interface ActiveRequest {
  req: EngineRequest;
  emit: EventSink;
  priority: number;
  arrival: number;
  /** The caller's share (API key and project), for fair-share admission. */
  shareKey?: string;
  /** performance.now() when the request entered the engine's waiting queue. */
  queuedAt: number;
  /** Milliseconds it waited there before admission; set when admitted. */
  queueMs?: number;
  promptIds: number[];
  maxTokens: number;
  /** Prompt positions already in the KV cache (prefix hits, then prefill chunks). */
  computed: number;
  cachedTokens: number;
  /** One per choice, built at admission; they start decoding once the prompt is in the cache. */
  sequences: Sequence[];
  promptLogprobs: (PromptTokenLogprob | null)[];
  /** Raw logits rows of every prompt position, gathered when the request asks for them. */
  promptLogits: Float32Array[];
  /** The prompt's text and token strings, for a request that echoes its prompt. */
  echo?: PromptEcho;
  aborted: boolean;
  /** Engine steps begun when the abort reached the engine (for the abort-to-free measurement). */
  abortedAtStep?: number;
  finishedChoices: number;
  /** Set for use_beam_search requests: their rows are BeamRows. */
  beams?: BeamGroup;
}

/** One decoding row of the batch: a choice or a live beam, and the request it belongs to. */
export interface Row {
  seq: Sequence | BeamRow;
  owner: ActiveRequest;
}
