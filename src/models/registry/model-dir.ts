/**
 * One directory under the models dir → a servable model (without its checkpoints) or the reason it
 * cannot be served. `ortserve.json` is optional here: a GGUF converted by hand into models/<id>/
 * is served under its directory name with defaults.
 */
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { MODEL_FORMATS, MODEL_META_FILE, type ModelFormat } from "../fetch/model-meta.ts";
import {
  REASONING_PARSERS,
  type ReasoningParserName,
  type SchedulingPolicy,
  type ServedModel,
  type StructuredOutputDefaults,
  TOOL_PARSERS,
  type ToolParserName,
  type UnavailableModel,
} from "./types.ts";
import { availableFormats, hasConfig, pickFormat, weightFile } from "./weights.ts";

export type BaseModel = Omit<ServedModel, "checkpoints">;

export type ModelDirResult =
  | { ok: true; model: BaseModel; warnings: string[] }
  | { ok: false; unavailable: UnavailableModel };

interface ModelSettings {
  id: string;
  format?: ModelFormat;
  schedulingPolicy: SchedulingPolicy;
  toolParser?: ToolParserName;
  reasoningParser?: ReasoningParserName;
  thinkingTokenBudget?: number;
  structuredOutputs?: StructuredOutputDefaults;
  maxModelLen?: number;
  created?: number;
}

const STRUCTURED_OUTPUT_KEYS = ["disable_any_whitespace"];

/** `"structured_outputs": {"disable_any_whitespace": true}`, or the problems with it. */
function structuredOutputDefaults(raw: unknown, problems: string[]): StructuredOutputDefaults | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    problems.push('"structured_outputs" must be an object such as {"disable_any_whitespace": true}');
    return undefined;
  }
  const fields = raw as Record<string, unknown>;
  // A misspelt option would otherwise change nothing, silently.
  const unknown = Object.keys(fields).filter((k) => !STRUCTURED_OUTPUT_KEYS.includes(k));
  if (unknown.length > 0)
    problems.push(
      `"structured_outputs" has unknown keys ${unknown.map((k) => JSON.stringify(k)).join(", ")} (it takes ${STRUCTURED_OUTPUT_KEYS.map((k) => JSON.stringify(k)).join(", ")})`,
    );
  const compact = fields.disable_any_whitespace ?? false;
  if (typeof compact !== "boolean") {
    problems.push('"structured_outputs.disable_any_whitespace" must be true or false');
    return undefined;
  }
  return { disableAnyWhitespace: compact };
}

const NOT_CONVERTED =
  "not converted: run `npm run setup-model` (the default model) or `npm run ortserve -- convert <file.gguf> <dir>`";

/** Checkpoint names are "<id>:step<N>", so an id of that shape would hide a checkpoint. */
export function idProblem(id: string): string | undefined {
  if (id === "" || /\s/.test(id)) return "must be non-empty without whitespace";
  if (/:step\d+$/.test(id)) return 'must not end in ":step<N>" (that names a checkpoint)';
  return undefined;
}

function parseSettings(json: unknown, dirName: string): ModelSettings {
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new Error("not a JSON object");
  const raw = json as Record<string, unknown>;
  const problems: string[] = [];
  const id = raw.id === undefined ? dirName : raw.id;
  if (typeof id !== "string") problems.push('"id" must be a string');
  else {
    const bad = idProblem(id);
    if (bad) problems.push(`"id" ${bad}`);
  }
  const format = raw.format;
  if (format !== undefined && !(MODEL_FORMATS as readonly unknown[]).includes(format))
    problems.push(`"format" must be one of ${MODEL_FORMATS.join(", ")}`);
  const policy = raw.scheduling_policy ?? "fcfs";
  if (policy !== "fcfs" && policy !== "priority")
    problems.push('"scheduling_policy" must be "fcfs" or "priority"');
  const toolParser = raw.tool_parser;
  if (toolParser !== undefined && !(TOOL_PARSERS as readonly unknown[]).includes(toolParser))
    problems.push(`"tool_parser" must be one of ${TOOL_PARSERS.join(", ")}`);
  const reasoningParser = raw.reasoning_parser;
  if (reasoningParser !== undefined && !(REASONING_PARSERS as readonly unknown[]).includes(reasoningParser))
    problems.push(`"reasoning_parser" must be one of ${REASONING_PARSERS.join(", ")}`);
  const budget = raw.thinking_token_budget;
  if (budget !== undefined && (!Number.isSafeInteger(budget) || (budget as number) < 0))
    problems.push('"thinking_token_budget" must be a non-negative integer');
  else if (budget !== undefined && reasoningParser === undefined)
    problems.push(
      '"thinking_token_budget" needs a "reasoning_parser" (a model without one has no think block)',
    );
  const structuredOutputs = structuredOutputDefaults(raw.structured_outputs, problems);
  const maxLen = raw.max_model_len;
  if (maxLen !== undefined && (!Number.isSafeInteger(maxLen) || (maxLen as number) <= 0))
    problems.push('"max_model_len" must be a positive integer');
  const created = raw.created;
  if (created !== undefined && (typeof created !== "number" || !Number.isFinite(created) || created < 0))
    problems.push('"created" must be unix seconds');
  if (problems.length > 0) throw new Error(problems.join("; "));
  return {
    id: id as string,
    format: format as ModelFormat | undefined,
    schedulingPolicy: policy as SchedulingPolicy,
    toolParser: toolParser as ToolParserName | undefined,
    reasoningParser: reasoningParser as ReasoningParserName | undefined,
    thinkingTokenBudget: budget as number | undefined,
    structuredOutputs,
    maxModelLen: maxLen as number | undefined,
    created: created === undefined ? undefined : Math.floor(created as number),
  };
}

function readSettings(dir: string, dirName: string): ModelSettings {
  let text: string;
  try {
    text = readFileSync(join(dir, MODEL_META_FILE), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      const bad = idProblem(dirName);
      if (bad) throw new Error(`directory name used as id ${bad}; give an "id" in ${MODEL_META_FILE}`);
      return { id: dirName, schedulingPolicy: "fcfs" };
    }
    throw err;
  }
  return parseSettings(JSON.parse(text), dirName);
}

export function readModelDir(dir: string, dirName: string): ModelDirResult {
  let settings: ModelSettings;
  try {
    settings = readSettings(dir, dirName);
  } catch (err) {
    const reason = `invalid ${MODEL_META_FILE}: ${(err as Error).message}`;
    return { ok: false, unavailable: { id: dirName, dir, reason } };
  }
  const { id } = settings;
  const formats = availableFormats(dir);
  if (formats.length === 0) {
    const reason = hasConfig(dir)
      ? `no ${weightFile("q4")} or ${weightFile("fp32")}; ${NOT_CONVERTED}`
      : NOT_CONVERTED;
    return { ok: false, unavailable: { id, dir, reason } };
  }
  const warnings: string[] = [];
  const format = pickFormat(formats, settings.format ?? "q4")!;
  if (settings.format !== undefined && format !== settings.format)
    warnings.push(
      `${dir}: "format" is ${settings.format} but only ${weightFile(format)} exists; serving ${format}`,
    );
  const created = settings.created ?? Math.floor(statSync(dir).mtimeMs / 1000);
  const model: BaseModel = { id, dir, format, schedulingPolicy: settings.schedulingPolicy, created };
  if (settings.toolParser !== undefined) model.toolParser = settings.toolParser;
  if (settings.reasoningParser !== undefined) model.reasoningParser = settings.reasoningParser;
  if (settings.thinkingTokenBudget !== undefined) model.thinkingTokenBudget = settings.thinkingTokenBudget;
  if (settings.structuredOutputs !== undefined) model.structuredOutputs = settings.structuredOutputs;
  if (settings.maxModelLen !== undefined) model.maxModelLen = settings.maxModelLen;
  return { ok: true, model, warnings };
}
