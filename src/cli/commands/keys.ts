/**
 * `ortserve keys create|list|revoke`: manage the server's API keys. Works while the server is
 * running (the database is shared); a revoked key is refused from its next request.
 */
import type { KeyInfo } from "../../storage/api-keys.ts";
import { dbPath } from "../../storage/db.ts";
import { openStorage } from "../../storage/storage.ts";
import { formatTable } from "../../storage/table.ts";
import { UsageError } from "../../util/usage-error.ts";
import { parseCommandLine } from "../args.ts";

export const summary = "create, list and revoke API keys";

export const usage = `Usage: ortserve keys <create|list|revoke> [options]

  keys create [--name <name>]   create a key and print it; it is shown only this once
  keys list [--json]            list keys: id, prefix, name, created, last used, revoked
  keys revoke <id|prefix>       revoke a key (by the id or prefix from \`keys list\`)

Only a hash of each key is stored; a lost key cannot be recovered, only replaced.

Options:
  --name <name>   name of the new key (default: "default")
  --json          print the list as JSON
  --db <file>     database file (default: $ORTSERVE_DB or <repo>/.cache/ortserve.db)
  -h, --help      show this help
`;

/** ISO time without milliseconds, or "-" when unset. */
function when(iso: string | null): string {
  return iso === null ? "-" : iso.replace(/\.\d{3}Z$/, "Z");
}

function keyTable(keys: KeyInfo[]): string {
  return formatTable(
    ["ID", "PREFIX", "NAME", "CREATED", "LAST USED", "REVOKED"],
    keys.map((k) => [
      String(k.id),
      k.prefix,
      k.name,
      when(k.createdAt),
      when(k.lastUsedAt),
      when(k.revokedAt),
    ]),
    new Set([0]),
  );
}

export async function run(argv: string[]): Promise<void> {
  const { values, positionals } = parseCommandLine({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: "string" },
      json: { type: "boolean" },
      db: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  const [action, ...args] = positionals;
  if (action === undefined) throw new UsageError("expected an action: create, list or revoke");
  if (!["create", "list", "revoke"].includes(action))
    throw new UsageError(`unknown action "${action}" (expected create, list or revoke)`);
  if (values.name !== undefined && action !== "create") throw new UsageError("--name only goes with create");
  if (values.json && action !== "list") throw new UsageError("--json only goes with list");
  if (action === "revoke" ? args.length !== 1 : args.length !== 0)
    throw new UsageError(
      action === "revoke" ? "expected one <id|prefix> to revoke" : `unexpected argument "${args[0]}"`,
    );

  const storage = openStorage(dbPath(values.db));
  try {
    if (action === "create") {
      const created = storage.keys.createKey(values.name);
      // The key alone on stdout, so `KEY=$(ortserve keys create)` works; the notes go to stderr.
      process.stdout.write(`${created.key}\n`);
      process.stderr.write(
        `Created key ${created.id} (${created.prefix}…, name "${created.name}"). ` +
          "It is shown only this once: store it now.\n",
      );
    } else if (action === "list") {
      const keys = storage.keys.listKeys();
      if (values.json) process.stdout.write(`${JSON.stringify(keys, null, 2)}\n`);
      else if (keys.length === 0)
        process.stdout.write("No API keys yet; `ortserve keys create` makes one.\n");
      else process.stdout.write(keyTable(keys));
    } else {
      const ref = args[0]!;
      const revoked = storage.keys.revokeKey(ref);
      if (!revoked) throw new Error(`no key with id or prefix "${ref}" (see \`ortserve keys list\`)`);
      process.stdout.write(
        `Revoked key ${revoked.id} (${revoked.prefix}…, name "${revoked.name}") at ${when(revoked.revokedAt)}.\n`,
      );
    }
  } finally {
    storage.close();
  }
}
