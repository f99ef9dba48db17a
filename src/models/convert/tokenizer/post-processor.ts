/**
 * tokenizer.json `post_processor`: adds BOS/EOS the way llama.cpp's tokenize(add_special = true)
 * does (BOS first, EOS last), or leaves the sequence alone.
 */

interface SpecialToken {
  id: number;
  text: string;
}

function item(kind: "SpecialToken" | "Sequence", id: string, typeId: number): object {
  return { [kind]: { id, type_id: typeId } };
}

export function buildPostProcessor(
  bos: SpecialToken | undefined,
  eos: SpecialToken | undefined,
  plain: object | null,
): object | null {
  if (!bos && !eos) return plain;
  const sequence = (seq: "A" | "B", typeId: number) => [
    ...(bos ? [item("SpecialToken", bos.text, typeId)] : []),
    item("Sequence", seq, typeId),
    ...(eos ? [item("SpecialToken", eos.text, typeId)] : []),
  ];
  const specials: Record<string, object> = {};
  for (const t of [bos, eos]) if (t) specials[t.text] = { id: t.text, ids: [t.id], tokens: [t.text] };
  return {
    type: "TemplateProcessing",
    single: sequence("A", 0),
    pair: [...sequence("A", 0), ...sequence("B", 1)],
    special_tokens: specials,
  };
}
