/** What a vocabulary-type builder contributes; tokenizer.ts assembles the files from it. */
export interface ModelParts {
  normalizer: object | null;
  preTokenizer: object | null;
  decoder: object;
  model: object;
  /** The post_processor to use when neither BOS nor EOS is added. */
  plainPostProcessor: object | null;
}

/** Settings that follow from the vocabulary type alone (also needed when tokenizer.json is embedded). */
export interface VocabTraits {
  /** HF clean_up_tokenization_spaces, following llama.cpp's clean_spaces for this vocabulary. */
  cleanSpaces: boolean;
  /** llama.cpp's add_bos when the GGUF does not say. */
  addBosDefault: boolean;
  tokenizerClass: string;
}
