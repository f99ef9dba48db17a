/**
 * GPT-2's byte alphabet (`bytes_to_unicode`), read backwards. Byte-level BPE
 * vocabularies spell every byte as one printable character: bytes that are
 * printable Latin-1 stand for themselves, the other 68 are shifted to U+0100…U+0143.
 */

const ALPHABET_SIZE = 256 + 68;

/** Byte → the vocabulary character that spells it (`bytes_to_unicode`). */
export const BYTE_TO_CHAR: readonly string[] = (() => {
  const chars: string[] = [];
  let shifted = 0;
  for (let byte = 0; byte < 256; byte++) {
    const printable = (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || byte >= 0xae;
    chars.push(String.fromCharCode(printable ? byte : 256 + shifted++));
  }
  return chars;
})();

/** Code point of a vocabulary character → the byte it spells, or -1. */
const CHAR_TO_BYTE: Int16Array = (() => {
  const table = new Int16Array(ALPHABET_SIZE).fill(-1);
  BYTE_TO_CHAR.forEach((ch, byte) => {
    table[ch.charCodeAt(0)] = byte;
  });
  return table;
})();

/**
 * The bytes a byte-level vocabulary string stands for, or undefined when it
 * holds a character outside the alphabet (HF tokenizers then keeps the
 * string's own UTF-8, as it does for most added tokens).
 */
export function byteLevelBytes(token: string): Uint8Array | undefined {
  const bytes = new Uint8Array(token.length);
  for (let i = 0; i < token.length; i++) {
    const code = token.charCodeAt(i);
    const byte = code < ALPHABET_SIZE ? CHAR_TO_BYTE[code] : -1;
    if (byte < 0) return undefined;
    bytes[i] = byte;
  }
  return bytes;
}
