/**
 * continue_final_message: render the whole chat, then cut the text right after the final message's
 * content so the template's end-of-turn markup is gone and the model carries on writing that
 * message. This is transformers' rule (render_jinja_template), trailing-whitespace handling included.
 */
import { invalidRequest } from "../errors.ts";

/** The text to continue: the content string, or the last part carrying `text`. */
function finalText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    for (let i = content.length - 1; i >= 0; i--) {
      const part: unknown = content[i];
      if (typeof part === "object" && part !== null && "text" in part) return String(part.text);
    }
  }
  throw invalidRequest(
    "continue_final_message is set but the final message has no text to continue.",
    "continue_final_message",
  );
}

export function cutAfterFinalMessage(rendered: string, finalContent: unknown): string {
  const message = finalText(finalContent);
  const stripped = message.trim();
  const at = rendered.lastIndexOf(stripped);
  if (at < 0) {
    throw invalidRequest(
      "continue_final_message is set but the final message does not appear in the text the chat template produced; the template may alter or drop it.",
      "continue_final_message",
    );
  }
  const leftStripped = message.trimStart();
  // If the template kept the message's trailing whitespace, keep it too; otherwise stop at the text.
  const keep =
    rendered.slice(at, at + leftStripped.length) === message ? leftStripped.length : stripped.length;
  return rendered.slice(0, at + keep);
}
