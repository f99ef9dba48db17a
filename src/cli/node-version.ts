/**
 * The Node versions ortserve runs on, as package.json's `engines.node` declares them: 22.16 or a
 * later 22, and 24 or later. node:sqlite (the keys and usage database) runs without a flag from
 * 22.13, and its `DatabaseSync.isTransaction`, which a failed transaction's rollback reads, came
 * in 22.16 and 24.0 (never in 23).
 */
export const SUPPORTED_NODE = "^22.16.0 || >=24.0.0";

export function nodeSupported(version: string = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  return major >= 24 || (major === 22 && minor >= 16);
}
