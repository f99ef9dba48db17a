/** The CPU's vector instruction sets as /proc/cpuinfo lists them (avx*, fma, f16c), for naming beside figures. */
import { readFileSync } from "node:fs";

export function vectorInstructionSets(cpuinfo = readProcCpuinfo()): string[] {
  const flags =
    cpuinfo
      .match(/^flags\s*:(.*)$/m)?.[1]
      ?.trim()
      .split(/\s+/) ?? [];
  return [...new Set(flags.filter((f) => /^(avx|fma$|f16c$|amx)/.test(f)))].sort();
}

function readProcCpuinfo(): string {
  try {
    return readFileSync("/proc/cpuinfo", "utf8");
  } catch {
    return "";
  }
}
