/**
 * `GET /v1/responses/{id}/input_items`: the conversation a stored response answered (a previous
 * response's input and output included, as OpenAI lists them), as OpenAI's item list — each item
 * with its id, newest first unless `order=asc`, a page of `limit` items after the item `after`.
 * Items get their ids when the response is stored (a previous response's output keeps its own), so
 * every listing of a response names them alike.
 */
import { invalidRequest, unsupportedField } from "../../errors.ts";
import type { InputItem } from "./items.ts";
import { newId } from "./response.ts";

/** A conversation item as stored: with its id. */
export type StoredItem = InputItem & { id: string };

/** Gives each item without an id one of its own kind. */
export function withItemIds(items: readonly InputItem[]): StoredItem[] {
  return items.map((item) => {
    if ("id" in item && typeof item.id === "string") return item as StoredItem;
    const prefix =
      item.type === "function_call"
        ? "fc"
        : item.type === "function_call_output"
          ? "fco"
          : item.type === "reasoning"
            ? "rs"
            : "msg";
    return { ...item, id: newId(prefix) };
  });
}

/** One item as the list shows it (OpenAI's item resource). */
function resource(item: StoredItem): Record<string, unknown> {
  switch (item.type) {
    case "function_call":
      return { id: item.id, type: "function_call", status: "completed", ...callFields(item) };
    case "function_call_output":
      return {
        id: item.id,
        type: "function_call_output",
        status: "completed",
        call_id: item.call_id,
        output: item.output,
      };
    case "reasoning":
      return {
        id: item.id,
        type: "reasoning",
        status: "completed",
        summary: [],
        content: item.content ?? [],
      };
    default: {
      const parts =
        typeof item.content === "string"
          ? [
              item.role === "assistant"
                ? { type: "output_text", text: item.content, annotations: [] }
                : { type: "input_text", text: item.content },
            ]
          : item.content.map((p) => (p.type === "output_text" ? { ...p, annotations: [] } : p));
      return { id: item.id, type: "message", role: item.role, status: "completed", content: parts };
    }
  }
}

const callFields = (c: { call_id: string; name: string; arguments: string }) => ({
  call_id: c.call_id,
  name: c.name,
  arguments: c.arguments,
});

export interface InputItemList {
  object: "list";
  data: Record<string, unknown>[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/** OpenAI's page size: 20 by default, 1 to 100. */
const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 100;

/** The list for a query (`after`, `limit`, `order`; `include` takes nothing this server could add). */
export function listInputItems(items: readonly StoredItem[], query: Record<string, unknown>): InputItemList {
  for (const key of Object.keys(query))
    if (!["after", "limit", "order", "include", "include[]"].includes(key))
      throw unsupportedField(key, "input items are listed with after, limit and order");
  const include = query.include ?? query["include[]"];
  if (include !== undefined && include !== "")
    throw unsupportedField(
      "include",
      "the input items hold everything this server keeps of them; there is nothing to include",
    );
  const order = query.order ?? "desc";
  if (order !== "asc" && order !== "desc")
    throw invalidRequest(`order must be "asc" or "desc", got ${JSON.stringify(order)}.`, "order");
  const limit = query.limit === undefined ? DEFAULT_LIMIT : Number(query.limit);
  if (typeof query.limit === "object" || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
    throw invalidRequest(`limit must be an integer from 1 to ${MAX_LIMIT}.`, "limit");
  const ordered = order === "asc" ? items : [...items].reverse();
  let start = 0;
  if (query.after !== undefined) {
    const at = ordered.findIndex((i) => i.id === query.after);
    if (typeof query.after !== "string" || at < 0)
      throw invalidRequest(`No input item with id ${JSON.stringify(query.after)} in this response.`, "after");
    start = at + 1;
  }
  const page = ordered.slice(start, start + limit);
  return {
    object: "list",
    data: page.map(resource),
    first_id: page[0]?.id ?? null,
    last_id: page.at(-1)?.id ?? null,
    has_more: start + limit < ordered.length,
  };
}
