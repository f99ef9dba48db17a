/**
 * Server-sent events for streamed completions: `data: <json>\n\n` per chunk, an error as
 * `data: {"error": ...}`, and `data: [DONE]` at the end (the OpenAI / vLLM framing); named events
 * for Anthropic's (stream-dialect.ts picks).
 */
import type { Response } from "express";
import type { ApiError } from "../errors.ts";

export class SseWriter {
  private readonly res: Response;
  private started = false;

  constructor(res: Response) {
    this.res = res;
  }

  get isStarted(): boolean {
    return this.started;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.res.status(200);
    this.res.setHeader("Content-Type", "text/event-stream; charset=utf-8");
    this.res.setHeader("Cache-Control", "no-cache");
    this.res.setHeader("Connection", "keep-alive");
    this.res.flushHeaders();
  }

  send(payload: unknown): void {
    this.start();
    this.res.write(`data: ${JSON.stringify(payload)}\n\n`);
  }

  /** A named event (Anthropic's framing). */
  event(name: string, payload: unknown): void {
    this.start();
    this.res.write(`event: ${name}\ndata: ${JSON.stringify(payload)}\n\n`);
  }

  /** Ends the stream without an end marker. */
  end(): void {
    this.start();
    this.res.end();
  }

  error(err: ApiError): void {
    this.send(err.toBody());
  }

  done(): void {
    this.start();
    this.res.end("data: [DONE]\n\n");
  }
}
