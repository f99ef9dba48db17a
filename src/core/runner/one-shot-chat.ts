/**
 * One user message in, a streamed greedy reply out: the smallest end-to-end
 * path through template, tokenizer, decoder and detokenizer.
 */
import { loadChatTemplate } from "./chat-template.ts";
import { DecoderSession, type DecoderSessionOptions } from "./decoder-session.ts";
import { IncrementalDetokenizer } from "./detokenizer.ts";
import { generateGreedy } from "./greedy.ts";
import { loadTokenizer } from "./tokenizer.ts";

export interface OneShotChatOptions extends DecoderSessionOptions {
  maxTokens: number;
  onText: (delta: string) => void;
}

export interface OneShotChatResult {
  /** Generated ids, without the stop token. */
  tokenIds: number[];
  finishReason: "stop" | "length";
}

export async function runOneShotChat(
  modelDir: string,
  userMessage: string,
  opts: OneShotChatOptions,
): Promise<OneShotChatResult> {
  const [template, tokenizer] = await Promise.all([loadChatTemplate(modelDir), loadTokenizer(modelDir)]);
  // Loaded last so a bad template or tokenizer cannot leak a session.
  const session = await DecoderSession.load(modelDir, opts);
  const seq = session.newSequence();
  try {
    const prompt = tokenizer.encode(template.render([{ role: "user", content: userMessage }]));
    const stops = new Set(session.config.eosTokenIds);
    const detok = new IncrementalDetokenizer(tokenizer.decode);
    const ids = await generateGreedy(seq, prompt, opts.maxTokens, [...stops], {
      onToken: (id) => {
        if (stops.has(id)) return;
        const delta = detok.push(id);
        if (delta) opts.onText(delta);
      },
    });
    const tail = detok.flush();
    if (tail) opts.onText(tail);
    const stopped = ids.length > 0 && stops.has(ids[ids.length - 1]);
    return { tokenIds: stopped ? ids.slice(0, -1) : ids, finishReason: stopped ? "stop" : "length" };
  } finally {
    seq.dispose();
    await session.release();
  }
}
