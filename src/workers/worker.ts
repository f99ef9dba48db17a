/**
 * Worker-thread entry (piscina). Each worker owns one EngineCore per model (its ONNX session, KV
 * cache and scheduler). A generate task stays open while its request runs; events stream back over
 * the MessagePort that came with the task, so the main thread never waits on the model.
 */
import type { MessagePort } from "node:worker_threads";
import { type EngineCore, RequestError } from "../core/step/engine-core.ts";
import { loadEngineCore } from "../core/step/load-engine-core.ts";
import type { EngineCoreConfig, EngineEvent, EngineRequest } from "../core/types.ts";
import { loadedFrom } from "./engine-key.ts";

export interface GenerateTask {
  kind: "generate";
  config: EngineCoreConfig;
  request: EngineRequest;
  port: MessagePort;
}

export interface StatsTask {
  kind: "stats";
}

/** Closes the engines of a model directory (a removed checkpoint; of one revision: a replaced model). */
export interface UnloadTask {
  kind: "unload";
  modelDir: string;
  revision?: string;
}

/** Test hook: kills this worker thread, to exercise crash recovery. */
export interface CrashTask {
  kind: "crash";
}

export type WorkerTask = GenerateTask | StatsTask | UnloadTask | CrashTask;

const engines = new Map<string, Promise<EngineCore>>();

function engineFor(config: EngineCoreConfig): Promise<EngineCore> {
  const key = JSON.stringify(config);
  let engine = engines.get(key);
  if (!engine) {
    engine = loadEngineCore(config);
    engines.set(key, engine);
    engine.catch(() => engines.delete(key));
  }
  return engine;
}

async function generate(task: GenerateTask): Promise<void> {
  const { port } = task;
  let open = true;
  // After an abort the port is closed while the engine may still report the request's end.
  const send = (e: EngineEvent) => {
    if (open) port.postMessage(e);
  };
  let engine: EngineCore;
  try {
    engine = await engineFor(task.config);
  } catch (err) {
    send({
      type: "error",
      code: "engine_failure",
      message: `model failed to load: ${(err as Error).message}`,
    });
    port.close();
    return;
  }
  await new Promise<void>((resolve) => {
    const end = () => {
      if (!open) return;
      open = false;
      port.close();
      resolve();
    };
    // Messages wait in the port until the handler is attached, so an early abort is not lost.
    engine
      .submit(task.request, (e) => {
        send(e);
        if (e.type === "done" || e.type === "error") end();
      })
      .then((handle) => {
        port.on("message", (m: { type: string }) => {
          if (m.type === "abort") {
            handle.abort();
            end();
          }
        });
      })
      .catch((err: unknown) => {
        if (err instanceof RequestError)
          send({ type: "error", code: err.code, message: err.message, param: err.param });
        else send({ type: "error", code: "engine_failure", message: (err as Error).message });
        end();
      });
  });
}

export default async function run(task: WorkerTask): Promise<unknown> {
  switch (task.kind) {
    case "generate":
      return generate(task);
    case "stats": {
      // Engines still loading are awaited; one that failed to load has nothing to report.
      const out: Record<string, unknown> = {};
      for (const [key, engine] of engines) {
        const loaded = await engine.catch(() => undefined);
        if (loaded) out[key] = loaded.stats();
      }
      return out;
    }
    case "unload": {
      let closed = 0;
      for (const [key, engine] of engines) {
        if (!loadedFrom(JSON.parse(key) as EngineCoreConfig, task.modelDir, task.revision)) continue;
        engines.delete(key);
        const loaded = await engine.catch(() => undefined);
        if (loaded) {
          await loaded.close();
          closed++;
        }
      }
      return closed;
    }
    case "crash":
      // An uncaught error ends the thread the way a native fault would.
      setImmediate(() => {
        throw new Error("worker crash requested");
      });
      return new Promise(() => {});
  }
}
