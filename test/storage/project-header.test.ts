import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/errors.ts";
import { MAX_PROJECT_ID, parseOpenAIProjectHeader, parseProjectHeader } from "../../src/storage/usage.ts";

function rejection(value: string, header?: string): ApiError {
  try {
    parseProjectHeader(value, header);
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error(`accepted ${JSON.stringify(value)}`);
}

describe("parseProjectHeader", () => {
  it.each([
    ["acme/chatbot", "acme", "chatbot"],
    ["a/b", "a", "b"],
    ["Team_1.x/proj-2.0", "Team_1.x", "proj-2.0"],
    ["..a/b..", "..a", "b.."],
    [`${"t".repeat(64)}/${"p".repeat(64)}`, "t".repeat(64), "p".repeat(64)],
  ])("accepts %s", (value, team, project) => {
    expect(parseProjectHeader(value)).toEqual({ team, project });
  });

  it.each([
    ["", 'missing "/"'],
    ["acme", 'missing "/"'],
    ["a/b/c", 'more than one "/"'],
    ["/p", "team is empty"],
    ["t/", "project is empty"],
    ["/", "team is empty"],
    [`${"t".repeat(65)}/p`, "team is longer than 64"],
    [`t/${"p".repeat(65)}`, "project is longer than 64"],
    ["te am/p", "team contains a character"],
    [" t/p", "team contains a character"],
    ["t/p ", "project contains a character"],
    ["t/pr@j", "project contains a character"],
    ["t/projé", "project contains a character"],
    ["t\\x/p", "team contains a character"],
    ["./p", 'team cannot be "."'],
    ["t/..", 'project cannot be ".."'],
  ])("rejects %j (%s)", (value, why) => {
    const err = rejection(value);
    expect(err.status).toBe(400);
    expect(err.type).toBe("invalid_request_error");
    expect(err.param).toBe("Compat-Project");
    expect(err.message).toContain(why);
    expect(err.message).toContain("<team>/<project>");
  });

  it("names the header it was given and keeps long values short in the message", () => {
    const err = rejection(`${"x".repeat(500)}`, "OpenAI-Project");
    expect(err.param).toBe("OpenAI-Project");
    expect(err.message).toMatch(/^Invalid OpenAI-Project header/);
    expect(err.message.length).toBeLessThan(300);
  });
});

describe("parseOpenAIProjectHeader", () => {
  it.each([
    ["proj_abc123", null, "proj_abc123"],
    ["proj_ABCdef-ghi.jkl", null, "proj_ABCdef-ghi.jkl"],
    ["my project #2 (test)", null, "my project #2 (test)"],
    ["a/b/c", null, "a/b/c"],
    ["p".repeat(MAX_PROJECT_ID), null, "p".repeat(MAX_PROJECT_ID)],
    ["acme/chatbot", "acme", "chatbot"],
  ])("accepts %s", (value, team, project) => {
    expect(parseOpenAIProjectHeader(value)).toEqual({ team, project });
  });

  it.each([
    ["", "empty"],
    ["p".repeat(MAX_PROJECT_ID + 1), "too long"],
    ["proj\u0007", "a control character"],
    ["projé", "non-ASCII"],
    [" proj", "a leading space"],
  ])("rejects %j (%s), naming OpenAI-Project", (value) => {
    let caught: unknown;
    try {
      parseOpenAIProjectHeader(value);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ApiError);
    expect((caught as ApiError).status).toBe(400);
    expect((caught as ApiError).param).toBe("OpenAI-Project");
    expect((caught as ApiError).message).toContain("project id");
  });
});
