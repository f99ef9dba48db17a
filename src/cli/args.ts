/** Small helpers shared by the subcommands for turning argv into checked options. */
import { type ParseArgsConfig, parseArgs } from "node:util";
import { KV_CACHE_DTYPE_SETTINGS, type KvCacheDtypeSetting } from "../core/types.ts";
import { MODEL_FORMATS, type ModelFormat } from "../models/fetch/model-meta.ts";
import { UsageError } from "../util/usage-error.ts";

/** parseArgs in strict mode, with its errors turned into UsageErrors. */
export function parseCommandLine<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs<T>({ strict: true, ...config });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code?.startsWith("ERR_PARSE_ARGS")) {
      throw new UsageError((err as Error).message);
    }
    throw err;
  }
}

export function parseFormat(value: string | undefined, fallback: ModelFormat): ModelFormat {
  if (value === undefined) return fallback;
  if ((MODEL_FORMATS as readonly string[]).includes(value)) return value as ModelFormat;
  throw new UsageError(`--format must be one of ${MODEL_FORMATS.join(", ")} (got "${value}")`);
}

export function parseKvCacheDtype(
  value: string | undefined,
  fallback: KvCacheDtypeSetting,
): KvCacheDtypeSetting {
  if (value === undefined) return fallback;
  if ((KV_CACHE_DTYPE_SETTINGS as readonly string[]).includes(value)) return value as KvCacheDtypeSetting;
  throw new UsageError(
    `--kv-cache-dtype must be one of ${KV_CACHE_DTYPE_SETTINGS.join(", ")} (got "${value}")`,
  );
}

export function parsePositiveInt(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0)
    throw new UsageError(`${name} must be a positive integer (got "${value}")`);
  return n;
}

/** A count where 0 means "no limit". */
export function parseNonNegativeInt(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new UsageError(`${name} must be a non-negative integer (got "${value}")`);
  return n;
}
