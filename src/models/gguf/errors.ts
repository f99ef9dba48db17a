/** A GGUF file that cannot be read: the message names the file, the field and the byte offset. */
export class GgufFormatError extends Error {
  override name = "GgufFormatError";
}
