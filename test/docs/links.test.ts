/**
 * The reference docs' relative links resolve: every `[text](target)` in README.md, docs/*.md and
 * bench/README.md that is not a URL names a file or directory of the repository, and its
 * `#anchor`, if any, one of that Markdown file's headings (GitHub's slugs).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../src/util/paths.ts";

const DOCS = [
  "README.md",
  "bench/README.md",
  ...readdirSync(join(repoRoot, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** The text outside fenced code blocks and inline code, where a link is a link. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** Every anchor a Markdown file's headings give, repeated headings numbered as GitHub does. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of markdown.replace(/^```[\s\S]*?^```/gm, "").matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

function links(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!);
}

describe("relative links in the reference docs", () => {
  it("slugs headings as GitHub does", () => {
    expect(slug("`src/core/runner/`")).toBe("srccorerunner");
    expect(slug("Overload (`node bench/overload.ts`)")).toBe("overload-node-benchoverloadts");
    expect(slug("Adding, serving and removing checkpoints")).toBe("adding-serving-and-removing-checkpoints");
  });

  it.each(DOCS)("%s: every relative link names an existing file and heading", (doc) => {
    const text = readFileSync(join(repoRoot, doc), "utf8");
    const broken: string[] = [];
    for (const target of links(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // a URL
      const [path, anchor] = target.split("#") as [string, string | undefined];
      const file = path === "" ? join(repoRoot, doc) : join(repoRoot, dirname(doc), path);
      if (relative(repoRoot, file).startsWith("..") || !existsSync(file)) {
        broken.push(`${target}: no such file`);
        continue;
      }
      if (anchor === undefined) continue;
      if (!file.endsWith(".md") || !anchors(readFileSync(file, "utf8")).has(anchor))
        broken.push(`${target}: no such heading`);
    }
    expect(broken).toEqual([]);
  });
});
