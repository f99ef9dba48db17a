#!/usr/bin/env node
/**
 * ortserve command-line entry point: `node src/cli/main.ts <command> [options]` from the sources,
 * `ortserve <command>` once installed (the package's bin, built to dist/cli/main.js).
 * Subcommands are loaded on demand so `--help` and `setup` start fast and do not
 * load ONNX Runtime or the converter.
 */
import { UsageError } from "../util/usage-error.ts";
import { nodeSupported, SUPPORTED_NODE } from "./node-version.ts";

interface Command {
  summary: string;
  usage: string;
  run(argv: string[]): Promise<void>;
}

const commands: Record<string, () => Promise<Command>> = {
  setup: () => import("./commands/setup.ts"),
  pull: () => import("./commands/pull.ts"),
  models: () => import("./commands/models.ts"),
  rm: () => import("./commands/rm.ts"),
  convert: () => import("./commands/convert.ts"),
  serve: () => import("./commands/serve.ts"),
  chat: () => import("./commands/chat.ts"),
  checkpoint: () => import("./commands/checkpoint.ts"),
  eval: () => import("./commands/eval.ts"),
  keys: () => import("./commands/keys.ts"),
  usage: () => import("./commands/usage.ts"),
};

/** Other spellings of a command (not listed in the help). */
const aliases: Record<string, string> = { checkpoints: "checkpoint" };

async function mainHelp(): Promise<string> {
  const lines = ["Usage: ortserve <command> [options]", "", "Commands:"];
  for (const [name, load] of Object.entries(commands))
    lines.push(`  ${name.padEnd(11)} ${(await load()).summary}`);
  lines.push("", "Run `ortserve <command> --help` for a command's options.", "");
  return lines.join("\n");
}

async function main(argv: string[]): Promise<number> {
  if (!nodeSupported()) {
    process.stderr.write(
      `ortserve needs Node ${SUPPORTED_NODE} (this is ${process.version}). ` +
        "In a clone of its repository, `npm start` and `npm run ortserve -- <command>` run on the Node 24 that `npm ci` installs.\n",
    );
    return 1;
  }
  const [given, ...rest] = argv;
  const name = given === undefined ? undefined : (aliases[given] ?? given);
  if (name === undefined || name === "-h" || name === "--help" || name === "help") {
    const help = await mainHelp();
    if (name === undefined) {
      process.stderr.write(help);
      return 2;
    }
    process.stdout.write(help);
    return 0;
  }
  const load = commands[name];
  if (!load) {
    process.stderr.write(`ortserve: unknown command "${name}"\n\n${await mainHelp()}`);
    return 2;
  }
  try {
    await (await load()).run(rest);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`ortserve ${name}: ${err.message}\nRun \`ortserve ${name} --help\` for usage.\n`);
      return 2;
    }
    // Expected failures carry a readable message; ORTSERVE_DEBUG=1 shows the stack too.
    const text = process.env.ORTSERVE_DEBUG ? (err as Error).stack : (err as Error).message;
    process.stderr.write(`ortserve ${name}: ${text ?? String(err)}\n`);
    return 1;
  }
}

// This file is only ever an entry point (import.meta.main is missing before Node 24.2).
process.exitCode = await main(process.argv.slice(2));
