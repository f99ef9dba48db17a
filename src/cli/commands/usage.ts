/** `ortserve usage`: request and token totals from the usage records, grouped one way. */
import { dbPath } from "../../storage/db.ts";
import { openStorage } from "../../storage/storage.ts";
import { formatTable } from "../../storage/table.ts";
import { toIsoTime, USAGE_GROUPS, type UsageGroup, type UsageTotals } from "../../storage/usage.ts";
import { UsageError } from "../../util/usage-error.ts";
import { parseCommandLine } from "../args.ts";

export const summary = "show request and token totals by project, key or model";

export const usage = `Usage: ortserve usage [options]

Prints totals (requests, prompt, completion and cached tokens, errors) from the
usage records the server writes, one row per project, key or model.

Options:
  --by project|key|model   how to group (default: project)
  --since <time>           only requests at or after this ISO-8601 time, e.g. 2025-06-01
                           or 2025-06-01T12:00:00Z
  --json                   print JSON instead of a table
  --db <file>              database file (default: $ORTSERVE_DB or <repo>/.cache/ortserve.db)
  -h, --help               show this help
`;

function groupLabel(by: UsageGroup, row: UsageTotals): string {
  if (by === "key") {
    if (row.group === null) return "(no key)";
    return [row.group, row.keyPrefix, row.keyName ? `(${row.keyName})` : ""].filter(Boolean).join(" ");
  }
  return row.group ?? (by === "project" ? "(no project)" : "(none)");
}

function totalsTable(by: UsageGroup, rows: UsageTotals[]): string {
  const sum = (f: (r: UsageTotals) => number) => rows.reduce((n, r) => n + f(r), 0);
  const numbers = (r: Omit<UsageTotals, "group">) =>
    [r.requests, r.promptTokens, r.completionTokens, r.cachedTokens, r.errors].map(String);
  const body = rows.map((r) => [groupLabel(by, r), ...numbers(r)]);
  if (rows.length > 1)
    body.push([
      "TOTAL",
      ...numbers({
        requests: sum((r) => r.requests),
        promptTokens: sum((r) => r.promptTokens),
        completionTokens: sum((r) => r.completionTokens),
        cachedTokens: sum((r) => r.cachedTokens),
        errors: sum((r) => r.errors),
      }),
    ]);
  return formatTable(
    [by.toUpperCase(), "REQUESTS", "PROMPT", "COMPLETION", "CACHED", "ERRORS"],
    body,
    new Set([1, 2, 3, 4, 5]),
  );
}

export async function run(argv: string[]): Promise<void> {
  const { values } = parseCommandLine({
    args: argv,
    options: {
      by: { type: "string" },
      since: { type: "string" },
      json: { type: "boolean" },
      db: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  const by = (values.by ?? "project") as UsageGroup;
  if (!USAGE_GROUPS.includes(by))
    throw new UsageError(`--by must be one of ${USAGE_GROUPS.join(", ")} (got "${values.by}")`);
  let since: string | undefined;
  if (values.since !== undefined) {
    try {
      since = toIsoTime(values.since);
    } catch {
      throw new UsageError(`--since must be an ISO-8601 date or time (got "${values.since}")`);
    }
  }

  const storage = openStorage(dbPath(values.db));
  try {
    const rows = storage.usage.usageTotals({ by, since });
    if (values.json) process.stdout.write(`${JSON.stringify({ by, since: since ?? null, rows }, null, 2)}\n`);
    else if (rows.length === 0) process.stdout.write(`No usage recorded${since ? ` since ${since}` : ""}.\n`);
    else process.stdout.write(totalsTable(by, rows));
  } finally {
    storage.close();
  }
}
