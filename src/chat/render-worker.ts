/**
 * Worker-thread entry (piscina) of the template pool: renders one chat in a thread of its own, so
 * a template that loops or grows without end stalls only this thread, which the pool then ends.
 * The task's port says "started" first: the render's time budget counts from there, not from
 * when the task was queued.
 */
import type { MessagePort } from "node:worker_threads";
import { ApiError, type ApiErrorType, invalidRequest } from "../errors.ts";
import { type RenderChatOptions, renderChat } from "./render.ts";
import type { ChatTemplateSource } from "./source.ts";

export interface RenderTask {
  source: ChatTemplateSource;
  options: RenderChatOptions;
  /** Longest prompt text a render may produce, in UTF-16 code units. */
  maxOutputChars: number;
  port: MessagePort;
}

/** An ApiError's fields: errors cross the thread boundary as plain data. */
export interface RenderFailure {
  status: number;
  type: ApiErrorType;
  message: string;
  param: string | null;
  code: string | null;
}

export type RenderOutcome = { text: string } | { error: RenderFailure };

function outputTooLarge(maxOutputChars: number): ApiError {
  return invalidRequest(
    `The chat template produced more than ${maxOutputChars} characters (the server's template output budget).`,
    "chat_template",
    "template_output_too_large",
  );
}

export default function render(task: RenderTask): RenderOutcome {
  task.port.postMessage("started");
  task.port.close();
  try {
    const { text } = renderChat(task.source, task.options);
    if (text.length > task.maxOutputChars) throw outputTooLarge(task.maxOutputChars);
    return { text };
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    const { status, type, message, param, code } = err;
    return { error: { status, type, message, param, code } };
  }
}
