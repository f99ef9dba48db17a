/**
 * The methods each known path answers, so another method on it is a 405 with `Allow` (not a 404,
 * which would say the path does not exist). Kept beside the routes in app.ts: a route added there
 * is added here.
 */
const ROUTES: [RegExp, string[]][] = [
  [/^\/health$/, ["GET", "HEAD"]],
  [/^\/metrics$/, ["GET", "HEAD"]],
  [/^\/openapi\.json$/, ["GET", "HEAD"]],
  [/^\/v1\/models$/, ["GET", "HEAD"]],
  [/^\/v1\/preview\/models\/[^/]+\/checkpoints$/, ["GET", "HEAD", "DELETE"]],
  [/^\/v1\/chat\/completions$/, ["POST"]],
  [/^\/v1\/completions$/, ["POST"]],
  [/^\/v1\/messages$/, ["POST"]],
  [/^\/v1\/responses$/, ["POST"]],
  [/^\/v1\/responses\/[^/]+$/, ["GET", "HEAD", "DELETE"]],
  [/^\/v1\/responses\/[^/]+\/input_items$/, ["GET", "HEAD"]],
  [/^\/v1\/messages\/count_tokens$/, ["POST"]],
  [/^\/tokenize$/, ["POST"]],
  [/^\/detokenize$/, ["POST"]],
];

/** The methods `path` answers, or undefined for a path the server does not have. */
export function allowedMethods(path: string): string[] | undefined {
  return ROUTES.find(([pattern]) => pattern.test(path))?.[1];
}
