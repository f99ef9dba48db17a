/** A request while the engine holds it: its lifecycle, and the row interface its choices or beams share. */
import type { EngineEvent, EngineRequest, PromptEcho, PromptTokenLogprob } from "../types.ts";
import type { BeamGroup } from "./beam-group.ts";
import type { TokenConstraint } from "./constrain.ts";
import type { Sequence } from "./sequence.ts";

export type EventSink = (event: EngineEvent) => void;

/**
 * A request's lifecycle (llama.cpp's slot_state, vLLM's RequestStatus):
 *
 *   waiting ──admitted──▶ prefilling ──prompt in the cache──▶ decoding ──finish()──▶ finished
 *      │                      │                                                        ▲
 *      └──────────────────────┴───────────finish() (abort, or max_tokens 0)────────────┘
 */
export type RequestState = "waiting" | "prefilling" | "decoding" | "finished";

export interface ActiveRequest {
  req: EngineRequest;
  emit: EventSink;
  state: RequestState;
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
  /** The client asked to abort; the request leaves at the next schedule(). */
  aborted: boolean;
  /** Engine steps begun when the abort reached the engine (for the abort-to-free measurement). */
  abortedAtStep?: number;
  /** Set for use_beam_search requests: their rows are the group's beams. */
  beams?: BeamGroup;
}

/**
 * One decoding row of the batch, a choice or a live beam: what the scheduler plans and the KV
 * layout places. Sampling tells the two apart by their request (beam search or not), never by
 * the row's class.
 */
export interface SequenceRow {
  /** Positions held in the KV cache. */
  length: number;
  /** Last token chosen: the input of the next step. */
  readonly lastToken: number;
  readonly finished: boolean;
  /** Limits the tokens this row may take (structured outputs). */
  readonly constraint?: TokenConstraint;
  /** Tokens the row's next pass computes: its last token, then any it took unsampled (jump-forward). */
  nextTokens(): number[];
  /** Its planned tokens are in the cache now. */
  computed(count: number): void;
}

/** The rows a request decodes with: its live choices or beams. */
export function liveRows(a: ActiveRequest): SequenceRow[] {
  const rows: SequenceRow[] = a.beams ? a.beams.rows : a.sequences;
  return rows.filter((r) => !r.finished);
}

/** Whether the request needs the logits of every prompt position (prompt logprobs or logits). */
export function needsPromptLogits(a: ActiveRequest): boolean {
  return a.req.promptLogprobs !== undefined || a.req.promptLogits === true;
}

/**
 * The one place a request ends: its choices still running finish with "abort" when it is
 * aborted (a beam search is abandoned: no choices), a finished beam search delivers its choices,
 * and `done` is the last event.
 */
export function finish(a: ActiveRequest, cause: "complete" | "abort"): void {
  if (a.state === "finished") return;
  a.state = "finished";
  if (cause === "abort") {
    if (a.beams) a.beams.release();
    else for (const seq of a.sequences) if (!seq.finished) a.emit(seq.finishEvent("abort", null));
  } else if (a.beams?.search.done) for (const e of a.beams.results()) a.emit(e);
  a.emit({ type: "done" });
}
