/**
 * Worker-thread entry (piscina) of the compile budget: compiles a constraint with its own XGrammar
 * instance over the model's vocabulary (given as workerData), so a grammar that compiles for too
 * long stalls only this thread, which the budget then ends. The task's port says "started" once the
 * instance is ready: the budget counts the compile, not the instance's start or the queue.
 */
import { type MessagePort, workerData } from "node:worker_threads";
import type { StructuredConstraint } from "./constraint-spec.ts";
import { compileWith, type Instance, loadInstance } from "./grammar-compile.ts";
import type { GrammarVocabulary } from "./vocabulary.ts";
import { abortReason, captureErrors } from "./xgrammar-module.ts";

export interface CompileTask {
  constraint: StructuredConstraint;
  port: MessagePort;
}

/** Milliseconds the compile took, or why XGrammar refused the constraint. */
export type CompileOutcome = { ms: number } | { error: string };

let instance: Promise<Instance> | undefined;

export default async function compile(task: CompileTask): Promise<CompileOutcome> {
  instance ??= loadInstance(workerData as GrammarVocabulary);
  const inst = await instance;
  task.port.postMessage("started");
  task.port.close();
  const t0 = performance.now();
  const r = await captureErrors(() => compileWith(inst, task.constraint));
  if (r.error !== undefined || !r.value) {
    // XGrammar reports bad input by aborting: that instance is not used again.
    instance = undefined;
    return { error: abortReason(r.messages, r.error) };
  }
  r.value.dispose();
  return { ms: performance.now() - t0 };
}
