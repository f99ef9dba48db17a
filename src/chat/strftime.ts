/**
 * Python's `datetime.now().strftime(fmt)` for the `strftime_now` template global (Llama 3.x and
 * Granite templates stamp today's date with it). C-locale English names, local time, and glibc's
 * `%-d` style no-padding flag; unknown directives pass through as Python does on glibc.
 */

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

function dayOfYear(date: Date): number {
  const y = date.getFullYear();
  return (Date.UTC(y, date.getMonth(), date.getDate()) - Date.UTC(y, 0, 1)) / 86_400_000 + 1;
}

function field(date: Date, code: string): [value: number, width: number] | string | undefined {
  switch (code) {
    case "a":
      return DAYS[date.getDay()]!.slice(0, 3);
    case "A":
      return DAYS[date.getDay()];
    case "b":
    case "h":
      return MONTHS[date.getMonth()]!.slice(0, 3);
    case "B":
      return MONTHS[date.getMonth()];
    case "p":
      return date.getHours() < 12 ? "AM" : "PM";
    case "d":
      return [date.getDate(), 2];
    case "e":
      return String(date.getDate()).padStart(2, " ");
    case "m":
      return [date.getMonth() + 1, 2];
    case "y":
      return [date.getFullYear() % 100, 2];
    case "Y":
      return [date.getFullYear(), 4];
    case "H":
      return [date.getHours(), 2];
    case "I":
      return [date.getHours() % 12 || 12, 2];
    case "M":
      return [date.getMinutes(), 2];
    case "S":
      return [date.getSeconds(), 2];
    case "j":
      return [dayOfYear(date), 3];
    case "%":
      return "%";
  }
  return undefined;
}

export function strftime(date: Date, format: string): string {
  return format.replace(/%(-?)(.)/gs, (whole, noPad: string, code: string) => {
    const value = field(date, code);
    if (value === undefined) return whole;
    if (typeof value === "string") return value;
    const [n, width] = value;
    return noPad ? String(n) : String(n).padStart(width, "0");
  });
}
