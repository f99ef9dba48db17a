/**
 * The server's V8 young generation, capped. Node 24 lets the young generation of a busy process
 * grow to 2 × 64 MiB semi-spaces per isolate (main thread and every worker), and a long-running
 * server never gives the pages back: in an hour's soak the main thread's grew by ~140 MiB after
 * warm-up while its live heap stayed under 20 MiB. The limit is a V8 flag read once when the
 * process starts (`v8.setFlagsFromString` at run time does not resize the heap), so `serve`
 * replaces its own process image with one that has the flag — same pid, so signals and
 * supervisors see no difference — unless the operator already chose a size.
 */
export const SEMI_SPACE_MIB = 16;

const FLAG = "--max-semi-space-size";

/** Whether Node was started with a semi-space size, on the command line or in NODE_OPTIONS. */
export function hasSemiSpaceFlag(execArgv: readonly string[], nodeOptions: string | undefined): boolean {
  const given = [...execArgv, ...(nodeOptions ?? "").split(/\s+/)];
  return given.some(
    (arg) => arg === FLAG || arg.startsWith(`${FLAG}=`) || arg.startsWith("--max_semi_space_size"),
  );
}

/**
 * Re-executes this process with the young generation capped when it was not started with a size.
 * Returns only when no re-exec happens (already set, or `process.execve` is unavailable, as on
 * Windows); otherwise the process image is replaced and nothing after the call runs.
 */
export function capYoungGeneration(): void {
  if (hasSemiSpaceFlag(process.execArgv, process.env.NODE_OPTIONS)) return;
  if (typeof process.execve !== "function") return;
  // The environment is passed on explicitly: Node 22's execve gives the new image none without it.
  process.execve(
    process.execPath,
    [process.execPath, ...process.execArgv, `${FLAG}=${SEMI_SPACE_MIB}`, ...process.argv.slice(1)],
    process.env,
  );
}
