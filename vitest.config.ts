import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 300_000,
    // Model-backed suites each load ONNX sessions and llama.cpp; two cores cannot run them side by side.
    fileParallelism: false,
    pool: "forks",
  },
});
