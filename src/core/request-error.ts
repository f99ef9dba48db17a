/** A request the engine cannot serve as asked; it fails alone, with a code the service maps to a 400. */
export class RequestError extends Error {
  readonly code: "invalid_request" | "priority_not_supported";
  readonly param?: string;
  constructor(code: "invalid_request" | "priority_not_supported", message: string, param?: string) {
    super(message);
    this.code = code;
    this.param = param;
  }
}
