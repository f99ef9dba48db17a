/** A mistake in how a command was called: reported without a stack, exit code 2 (src/cli/main.ts). */
export class UsageError extends Error {
  override name = "UsageError";
}
