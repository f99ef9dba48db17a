/**
 * The CPU a fidelity report was measured on. llama.cpp picks its kernels by instruction set (its Q8
 * activation arithmetic rounds differently on AVX2 and AVX-512), so every figure compared with its
 * quantized run is only meaningful next to these.
 */
import { readFileSync } from "node:fs";
import { cpus } from "node:os";

export interface MachineFigures {
  cpu: string;
  logicalCpus: number;
  /** The x86 extensions that select llama.cpp's and ortserve's kernels, as /proc/cpuinfo names them. */
  instructionSets: string[];
  /** ORTSERVE_MAX_ISA when set: ortserve's native kernels held to that instruction set. */
  ortserveMaxIsa?: string;
  /** What llama.cpp's loaded CPU backend says it uses (its variant follows the CPU). */
  llamaCpp?: string;
}

const KERNEL_SELECTING = [
  "avx2",
  "fma",
  "f16c",
  "avx_vnni",
  "avx512f",
  "avx512bw",
  "avx512vl",
  "avx512_vnni",
];

export function machineFigures(llamaCpp?: string, cpuinfo = readCpuinfo()): MachineFigures {
  const flags = new Set(/^flags\s*:(.*)$/m.exec(cpuinfo)?.[1]?.trim().split(/\s+/) ?? []);
  return {
    cpu: cpus()[0]?.model ?? "unknown",
    logicalCpus: cpus().length,
    instructionSets: KERNEL_SELECTING.filter((f) => flags.has(f)),
    ...(process.env.ORTSERVE_MAX_ISA ? { ortserveMaxIsa: process.env.ORTSERVE_MAX_ISA } : {}),
    ...(llamaCpp ? { llamaCpp } : {}),
  };
}

function readCpuinfo(): string {
  try {
    return readFileSync("/proc/cpuinfo", "utf8");
  } catch {
    return "";
  }
}
