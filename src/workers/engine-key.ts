/** Which loaded engines an unload names: those of a model directory, or of one revision of it. */
import type { EngineCoreConfig } from "../core/types.ts";

export function loadedFrom(config: EngineCoreConfig, modelDir: string, revision?: string): boolean {
  return config.modelDir === modelDir && (revision === undefined || config.revision === revision);
}
