/** Structured JSON logs on stderr, one object per line, always with a level, a time and a message. */

export type LogLevel = "debug" | "info" | "warn" | "error";
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

/** ORTSERVE_LOG_LEVEL, refused when it names no level (a typo would otherwise log everything). */
function levelFromEnv(): LogLevel {
  const value = process.env.ORTSERVE_LOG_LEVEL;
  if (value === undefined || value === "") return "info";
  if (!Object.hasOwn(ORDER, value))
    throw new Error(`ORTSERVE_LOG_LEVEL must be ${Object.keys(ORDER).join(", ")} (got "${value}")`);
  return value as LogLevel;
}

export function createLogger(
  level: LogLevel = levelFromEnv(),
  base: Record<string, unknown> = {},
  write: (line: string) => void = (line) => process.stderr.write(line),
): Logger {
  const log = (l: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[l] < ORDER[level]) return;
    write(`${JSON.stringify({ time: new Date().toISOString(), level: l, msg, ...base, ...fields })}\n`);
  };
  return {
    debug: (m, f) => log("debug", m, f),
    info: (m, f) => log("info", m, f),
    warn: (m, f) => log("warn", m, f),
    error: (m, f) => log("error", m, f),
    child: (fields) => createLogger(level, { ...base, ...fields }, write),
  };
}
