/**
 * `pull` end to end with the real converter: a GGUF on disk, a GGUF and a sharded safetensors repo
 * from a local hub server (hub-server.ts), each converted into the models directory and servable
 * by the registry's file check; ids already taken refused unless --force; a model the converter
 * refuses fails with the converter's message and keeps its verified download.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConverter } from "../../src/models/convert/run-conversion.ts";
import { hubClient } from "../../src/models/fetch/hf-hub.ts";
import { GgmlType, GgufValueType } from "../../src/models/gguf/types.ts";
import { metadataEntry, writeGguf } from "../../src/models/gguf/writer.ts";
import { listInstalled } from "../../src/models/installed.ts";
import { cardLicense } from "../../src/models/pull/fetch-weights.ts";
import { type PullOptions, pull } from "../../src/models/pull/pull.ts";
import { ModelRegistry } from "../../src/models/registry.ts";
import type { ProgressStream } from "../../src/util/progress.ts";
import { type FakeHub, startFakeHub } from "../fetch/hub-server.ts";
import { buildSyntheticModel, writeSyntheticGguf } from "../fixtures/synthetic-model.ts";
import { ggufAsHfTensors, type Tensor, writeSafetensors } from "../fixtures/training-run.ts";

const quiet: ProgressStream = { isTTY: false, write: () => true };
const COMMIT = "fedcba9876543210fedcba9876543210fedcba98";
let root: string;
let hub: FakeHub;
let gguf: string;
let builtDir: string;
let otherGguf: string;
let base: PullOptions;

/** The safetensors repo: the synthetic model's tokenizer and config, its weights in two shards. */
function safetensorsRepo(
  modelDir: string,
  tensors: Tensor[],
): Record<string, { data: Buffer; lfs?: boolean }> {
  const half = Math.ceil(tensors.length / 2);
  const shards = [tensors.slice(0, half), tensors.slice(half)];
  const files: Record<string, { data: Buffer; lfs?: boolean }> = {};
  const weightMap: Record<string, string> = {};
  shards.forEach((shard, i) => {
    const name = `model-0000${i + 1}-of-00002.safetensors`;
    const path = join(root, name);
    writeSafetensors(path, shard);
    files[name] = { data: readFileSync(path), lfs: true };
    for (const t of shard) weightMap[t.name] = name;
  });
  files["model.safetensors.index.json"] = {
    data: Buffer.from(JSON.stringify({ metadata: {}, weight_map: weightMap })),
  };
  for (const f of ["config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"])
    files[f] = { data: readFileSync(join(modelDir, f)) };
  return files;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "ortserve-pull-"));
  const built = await buildSyntheticModel(join(root, "built"), ["fp32"], "reference");
  gguf = built.ggufPath;
  builtDir = built.modelDir;
  otherGguf = writeSyntheticGguf(join(root, "other.gguf"), 7);
  hub = await startFakeHub({
    "org/tiny-GGUF": {
      commit: COMMIT,
      files: {
        "tiny-q4.gguf": { data: readFileSync(gguf), lfs: true },
        "README.md": { data: Buffer.from("---\nlicense: apache-2.0\ntags:\n- gguf\n---\n# Tiny\n") },
      },
    },
    "org/Tiny-Safetensors": { commit: COMMIT, files: safetensorsRepo(built.modelDir, ggufAsHfTensors(gguf)) },
  });
  base = {
    source: "",
    modelsDir: join(root, "models"),
    cacheDir: join(root, "cache"),
    hub: hubClient({ HF_ENDPOINT: hub.url }),
    converter: await loadConverter(),
    log: () => {},
    progressStream: quiet,
  };
});
afterAll(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

const servable = (id: string) => ModelRegistry.load(base.modelsDir!, { checkFiles: true }).get(id);

describe("pull", () => {
  it("converts a GGUF on disk under its file name, then finds it installed", async () => {
    const first = await pull({ ...base, source: gguf, format: "fp32" });
    expect(first).toMatchObject({ id: "reference", action: "converted" });
    expect(servable("reference")?.format).toBe("fp32");
    const meta = JSON.parse(readFileSync(join(first.modelDir, "ortserve.json"), "utf8"));
    // The fixture: per layer 7 projections (Q4_1 in layer 0, Q4_0 in layer 1) and 2 norms, plus embedding and final norm.
    expect(meta.quant_mix).toBe("Q4_0 7, Q4_1 7, F32 5, Q8_0 1");
    expect(meta.source).toMatchObject({ kind: "file", path: gguf });
    expect(readdirSync(base.modelsDir!).filter((f) => f.startsWith("."))).toEqual([]);
    expect((await pull({ ...base, source: gguf, format: "fp32" })).action).toBe("installed");
  });

  it("refuses another model under a taken id unless --force, and adds a format to the same one", async () => {
    await pull({ ...base, source: gguf, name: "taken", format: "fp32" });
    await expect(pull({ ...base, source: otherGguf, name: "taken", format: "fp32" })).rejects.toThrow(
      /holds another model; `ortserve rm taken`/,
    );
    const replaced = await pull({ ...base, source: otherGguf, name: "taken", format: "fp32", force: true });
    expect(replaced.action).toBe("converted");
    const stamp = JSON.parse(readFileSync(join(replaced.modelDir, "onnx", ".converted.json"), "utf8"));
    expect(stamp.gguf_sha256).toBe(replaced.weights.sha256);
    const q4 = await pull({ ...base, source: otherGguf, name: "taken", format: "q4" });
    expect(q4.action).toBe("converted");
    expect(listInstalled(base.modelsDir!).find((m) => m.id === "taken")?.formats).toEqual(["q4", "fp32"]);
  });

  it("keeps an installed model's settings when it adds a format, and clears builds of killed runs", async () => {
    const first = await pull({ ...base, source: gguf, name: "kept", format: "fp32" });
    const settings = `${JSON.stringify({ id: "kept", scheduling_policy: "priority" })}\n`;
    writeFileSync(join(first.modelDir, "ortserve.json"), settings);
    // A pid no process has (above the kernel's pid_max): a run that was killed mid-build.
    const stale = join(base.modelsDir!, ".pull-99999999-kept");
    mkdirSync(stale);
    expect((await pull({ ...base, source: gguf, name: "kept", format: "q4" })).action).toBe("converted");
    expect(readFileSync(join(first.modelDir, "ortserve.json"), "utf8")).toBe(settings);
    expect(servable("kept")?.schedulingPolicy).toBe("priority");
    expect(existsSync(stale)).toBe(false);
  });

  it("pulls a GGUF from the hub, pinned to its commit, printing the model card's license first", async () => {
    const lines: string[] = [];
    const got = await pull({
      ...base,
      source: "hf:org/tiny-GGUF/tiny-q4.gguf",
      format: "fp32",
      log: (l) => lines.push(l),
    });
    expect(lines[0]).toBe(`hf:org/tiny-GGUF@${COMMIT}: license: apache-2.0`);
    const ggufGet = hub.requests.findIndex((r) => r.method === "GET" && r.url.endsWith("/tiny-q4.gguf"));
    const cardGet = hub.requests.findIndex((r) => r.method === "GET" && r.url.endsWith("/README.md"));
    expect(cardGet).toBeGreaterThanOrEqual(0);
    expect(cardGet).toBeLessThan(ggufGet);
    expect(got.id).toBe("tiny-q4");
    expect(servable("tiny-q4")).toBeDefined();
    const meta = JSON.parse(readFileSync(join(got.modelDir, "ortserve.json"), "utf8"));
    expect(meta.source).toMatchObject({
      kind: "hf",
      repo: "org/tiny-GGUF",
      revision: "main",
      commit: COMMIT,
    });
    expect(existsSync(join(base.cacheDir!, "hf", "org--tiny-GGUF", COMMIT, "tiny-q4.gguf"))).toBe(true);
  });

  it("pulls a sharded safetensors repo from the hub through the checkpoint import's converter", async () => {
    const got = await pull({ ...base, source: "hf:org/Tiny-Safetensors", format: "fp32" });
    expect(got.id).toBe("tiny-safetensors");
    expect(got.weights.kind).toBe("safetensors");
    const model = servable("tiny-safetensors");
    expect(model?.format).toBe("fp32");
    // The synthetic template writes no <tool_call>, so no tool parser is claimed.
    expect(model?.toolParser).toBeUndefined();
    const meta = JSON.parse(readFileSync(join(got.modelDir, "ortserve.json"), "utf8"));
    expect(meta.quant_mix).toMatch(/^F32 \d+$/);
    const gets = hub.requests.filter((r) => r.method === "GET" && r.url.startsWith("/org/Tiny-Safetensors/"));
    expect(gets.every((r) => r.url.includes(`/resolve/${COMMIT}/`))).toBe(true);
    expect(gets.map((r) => r.url.split("/").at(-1)).sort()).toEqual([
      "config.json",
      "generation_config.json",
      "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors",
      "model.safetensors.index.json",
      "tokenizer.json",
      "tokenizer_config.json",
    ]);
  });

  it("pulls a safetensors directory on disk with one model.safetensors", async () => {
    const dir = join(root, "My-Local-Model");
    mkdirSync(dir);
    for (const f of ["config.json", "tokenizer.json", "tokenizer_config.json"])
      writeFileSync(join(dir, f), readFileSync(join(builtDir, f)));
    writeSafetensors(join(dir, "model.safetensors"), ggufAsHfTensors(gguf));
    const got = await pull({ ...base, source: dir, format: "fp32" });
    expect(got).toMatchObject({ id: "my-local-model", action: "converted" });
    expect(servable("my-local-model")?.format).toBe("fp32");
    expect(got.weights.source).toMatchObject({ kind: "dir", path: dir });
    expect((await pull({ ...base, source: dir, format: "fp32" })).action).toBe("installed");
  });

  it("fails with the converter's error after the download, and keeps the download", async () => {
    const unsupported = join(root, "mamba-model.gguf");
    const U = GgufValueType;
    writeGguf(unsupported, {
      metadata: [metadataEntry("general.architecture", U.STRING, "mamba")],
      tensors: [{ name: "token_embd.weight", dims: [32, 2], type: GgmlType.F32, data: new Uint8Array(256) }],
    });
    const local = await startFakeHub({
      "org/mamba": {
        commit: COMMIT,
        files: { "mamba-model.gguf": { data: readFileSync(unsupported), lfs: true } },
      },
    });
    try {
      const err = await pull({
        ...base,
        hub: hubClient({ HF_ENDPOINT: local.url }),
        source: "hf:org/mamba/mamba-model.gguf",
      }).catch((e: Error) => e);
      expect((err as Error).message).toMatch(/unsupported architecture "mamba"/);
      const kept = join(base.cacheDir!, "hf", "org--mamba", COMMIT, "mamba-model.gguf");
      expect((err as Error).message).toContain(`The verified download is kept: ${kept}`);
      expect(readFileSync(kept).equals(readFileSync(unsupported))).toBe(true);
      expect(existsSync(join(base.modelsDir!, "mamba-model"))).toBe(false);
      expect(readdirSync(base.modelsDir!).filter((f) => f.startsWith("."))).toEqual([]);
    } finally {
      await local.close();
    }
  });

  it("explains a source it cannot place and an id it cannot use", async () => {
    await expect(pull({ ...base, source: "no-such-model" })).rejects.toThrow(
      /not a catalogue name.*smollm2-135m-instruct/,
    );
    await expect(pull({ ...base, source: "hf:org/tiny-GGUF/readme.md" })).rejects.toThrow(/must be a \.gguf/);
    await expect(pull({ ...base, source: "hf:org/big/big-q4-00001-of-00003.gguf" })).rejects.toThrow(
      /split GGUF.*llama-gguf-split --merge/,
    );
    await expect(pull({ ...base, source: gguf, name: "x:step3" })).rejects.toThrow(/model id "x:step3"/);
    const notGguf = join(root, "notes.txt");
    writeFileSync(notGguf, "hi");
    await expect(pull({ ...base, source: notGguf })).rejects.toThrow(/must be a \.gguf/);
    mkdirSync(join(root, "empty-dir"));
    await expect(pull({ ...base, source: join(root, "empty-dir") })).rejects.toThrow(/no config.json/);
  });
});

describe("cardLicense", () => {
  it("reads the license from a model card's front matter", () => {
    expect(cardLicense("---\nlanguage: en\nlicense: mit\n---\ntext")).toBe("mit");
    expect(cardLicense('---\r\nlicense: "apache-2.0"\r\n---\r\n')).toBe("apache-2.0");
    expect(cardLicense("---\nlicense: other\nlicense_name: gemma\n---\n")).toBe("other (gemma)");
    expect(cardLicense("# no front matter\nlicense: mit\n")).toBeUndefined();
    expect(cardLicense("---\ntags: [a]\n---\nlicense: mit")).toBeUndefined();
  });
});
