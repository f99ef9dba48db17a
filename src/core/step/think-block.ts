/**
 * A reasoning model's think block, followed token by token in the engine: which output tokens are
 * reasoning (counted for usage), and, with a thinking budget, when the block must be closed.
 *
 * Where the block starts follows the protocol's parser (src/protocol/reasoning/think-parser.ts):
 * already open when the prompt opened it, else opened by an output that begins with `<think>`
 * (after whitespace), else there is none. It ends at the first `</think>`. Tags are matched on the
 * tokens' bytes, so a tag spelt in several tokens (or inside one with other text) is still found.
 *
 * The budget is llama.cpp's reasoning budget (common/reasoning-budget.cpp): each token sampled
 * inside the block after its opening spends one; once none is left (and the bytes so far end on a
 * whole UTF-8 character, else after the token that completes it), the close text — `</think>` and
 * what the template writes after it — is forced token by token; then the answer goes on freely.
 * Forced tokens spend nothing.
 */
import { THINK_CLOSE, THINK_OPEN } from "../structured/constraint-spec.ts";

const OPEN = Buffer.from(THINK_OPEN, "latin1");
const CLOSE = Buffer.from(THINK_CLOSE, "latin1");

export interface ThinkBudget {
  /** Tokens the model may sample inside the block before it is closed for it. */
  tokens: number;
  /** The token ids forced when the budget is spent: `</think>` and what follows it. */
  closeIds: readonly number[];
}

/** Where the output is: before knowing whether it thinks, inside the block, or in the answer. */
export type ThinkPhase = "start" | "thinking" | "answer";

/** Bytes a UTF-8 sequence still needs after `bytes` (0: it ends on a whole character). */
function utf8Missing(bytes: readonly number[], missing: number): number {
  let need = missing;
  for (const b of bytes) {
    if (need > 0 && (b & 0xc0) === 0x80) need--;
    else if (b >= 0xf0) need = 3;
    else if (b >= 0xe0) need = 2;
    else if (b >= 0xc0) need = 1;
    else need = 0;
  }
  return need;
}

export class ThinkBlock {
  phase: ThinkPhase;
  /** Output tokens that belong to the block, its tags included (usage's reasoning_tokens). */
  reasoningTokens = 0;
  private readonly budget?: ThinkBudget;
  /** Tokens sampled inside the block after its opening (what the budget counts). */
  private spent = 0;
  /** Next position in the budget's close ids while forcing; -1 when not forcing. */
  private forcing = -1;
  /** The model left the forced close (a mask or a constraint refused it): no more forcing. */
  private gaveUp = false;
  private utf8Pending = 0;
  /** Tokens read while the phase is undecided: the block's if they open it. */
  private undecided = 0;
  /** The output's bytes while the phase is undecided; the block's last bytes while thinking. */
  private tail: number[] = [];

  constructor(opened: boolean, budget?: ThinkBudget) {
    this.phase = opened ? "thinking" : "start";
    this.budget = budget && budget.closeIds.length > 0 ? budget : undefined;
    if (opened) this.checkBudget();
  }

  /** The token the budget forces next, if it is forcing one. */
  forcedNext(): number | undefined {
    return this.forcing >= 0 ? this.budget!.closeIds[this.forcing] : undefined;
  }

  /** Forcing cannot go on (the token is not allowed): the model continues as it would. */
  abandonForcing(): void {
    this.forcing = -1;
    this.gaveUp = true;
  }

  /** One output token, sampled or forced, with its bytes. */
  push(tokenId: number, bytes: readonly number[]): void {
    const forced = this.forcing >= 0;
    if (forced) {
      if (tokenId !== this.budget!.closeIds[this.forcing]) this.abandonForcing();
      else if (++this.forcing >= this.budget!.closeIds.length) this.forcing = -1;
    }
    this.utf8Pending = utf8Missing(bytes, this.utf8Pending);
    if (this.phase === "start") this.decide(bytes);
    else if (this.phase === "thinking") this.think(bytes, forced);
  }

  private decide(bytes: readonly number[]): void {
    this.tail.push(...bytes);
    this.undecided++;
    let lead = 0;
    while (lead < this.tail.length && /\s/.test(String.fromCharCode(this.tail[lead]!))) lead++;
    const body = Buffer.from(this.tail.slice(lead));
    if (body.length >= OPEN.length && body.subarray(0, OPEN.length).equals(OPEN)) {
      // The tokens that open the block are the block's (leading whitespace included).
      this.reasoningTokens += this.undecided;
      this.phase = "thinking";
      const rest = [...body.subarray(OPEN.length)];
      this.tail = [];
      if (rest.length > 0) this.think(rest, false, false);
      else this.checkBudget();
    } else if (!OPEN.subarray(0, body.length).equals(body)) {
      this.phase = "answer";
      this.tail = [];
    }
  }

  /** Bytes inside the block: the close tag ends it; otherwise a sampled token spends budget. */
  private think(bytes: readonly number[], forced: boolean, counts = true): void {
    if (counts) this.reasoningTokens++;
    this.tail.push(...bytes);
    if (Buffer.from(this.tail).indexOf(CLOSE) >= 0) {
      this.phase = "answer";
      this.tail = [];
      return;
    }
    this.tail = this.tail.slice(-(CLOSE.length - 1));
    if (counts && !forced) this.spent++;
    this.checkBudget();
  }

  private checkBudget(): void {
    const b = this.budget;
    if (!b || this.gaveUp || this.forcing >= 0 || this.phase !== "thinking") return;
    if (this.spent >= b.tokens && this.utf8Pending === 0) this.forcing = 0;
  }
}
