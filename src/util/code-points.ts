/** Characters as JSON Schema, Python and vLLM count them: code points (a surrogate pair is one). */

const SURROGATE = /[\ud800-\udfff]/;

/**
 * UTF-16 units less one per surrogate pair (a lone surrogate counts as one). Text without
 * surrogates is answered by one native scan: a request may carry a megabyte of stop strings.
 */
export function codePointLength(s: string): number {
  if (!SURROGATE.test(s)) return s.length;
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}
