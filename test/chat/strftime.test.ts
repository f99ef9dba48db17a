import { describe, expect, it } from "vitest";
import { strftime } from "../../src/chat/strftime.ts";

describe("strftime", () => {
  const date = new Date(2024, 6, 5, 14, 3, 9); // local time, as Python's datetime.now()

  it("formats the directives chat templates use", () => {
    expect(strftime(date, "%d %b %Y")).toBe("05 Jul 2024");
    expect(strftime(date, "%B %-d, %Y")).toBe("July 5, 2024");
    expect(strftime(date, "%A %a %y-%m-%d %H:%M:%S %I%p %j %%")).toBe(
      "Friday Fri 24-07-05 14:03:09 02PM 187 %",
    );
  });

  it("passes unknown directives through", () => {
    expect(strftime(date, "%Q %Y")).toBe("%Q 2024");
  });
});
