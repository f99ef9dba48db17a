/**
 * The json_valid metric's validator: an output is valid when it parses as JSON (as is, after
 * trimming surrounding whitespace) and satisfies the item's JSON Schema (draft 2020-12, with the
 * `format` keywords checked).
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

export type JsonValidator = (output: string) => boolean;

// addUsedSchema off: items may repeat a schema's $id without clashing in the shared instance.
const ajv = new Ajv2020({ strict: false, allErrors: false, addUsedSchema: false });
// ajv-formats is CommonJS: its plugin is the module's `default` export.
addFormats.default(ajv);

/** Compiles a schema into a validator of output text; throws with the reason a schema is invalid. */
export function jsonSchemaValidator(schema: unknown): JsonValidator {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema))
    if (typeof schema !== "boolean") throw new Error("a JSON Schema must be an object or a boolean");
  const validate = ajv.compile(schema as object);
  return (output) => {
    let value: unknown;
    try {
      value = JSON.parse(output);
    } catch {
      return false;
    }
    return validate(value) === true;
  };
}
