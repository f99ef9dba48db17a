/**
 * Fidelity prompts: chat turns in the SmolLM2 template plus raw text, spread over prose, code,
 * math, lists, other languages and JSON so that no single kind of token dominates. One long
 * passage reaches a few hundred positions, where a positional-encoding mistake would show.
 */

export interface FidelityPrompt {
  id: string;
  text: string;
}

const defaultSystem = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/** SmolLM2's chat template for a conversation ending in an open assistant turn. */
export function chatPrompt(turns: readonly string[], system = defaultSystem): string {
  let out = `<|im_start|>system\n${system}<|im_end|>\n`;
  turns.forEach((content, i) => {
    out += `<|im_start|>${i % 2 === 0 ? "user" : "assistant"}\n${content}<|im_end|>\n`;
  });
  return `${out}<|im_start|>assistant\n`;
}

const longPassage = [
  "The lighthouse at the end of the harbour had been built in 1861, when the town still lived from",
  "fishing and the small trade in salt and timber that came down the river. Its first keeper, a",
  "former ship's carpenter called Elias Brandt, kept a logbook in which he recorded the weather, the",
  "ships that passed, and the price of lamp oil, which rose every winter. When the railway arrived",
  "in 1889 the harbour lost most of its traffic, but the lighthouse stayed, and so did the Brandt",
  "family: three generations of keepers climbed the hundred and twelve steps every evening to light",
  "the lamp. In 1931 the lamp was electrified, and the keeper's job changed from tending a flame to",
  "checking fuses and cleaning the great glass lens, which had been ground in Paris and shipped in",
  "eleven crates. During the storm of February 1953 the power failed for six hours, and the last",
  "keeper, Anna Brandt, lit an old oil lamp and held it in the lantern room until morning. The",
  "lighthouse was automated in 1978. Today it is a small museum, and the logbooks, all forty-one of",
  "them, are kept in a glass case on the ground floor, open at the page describing that night.",
  "Visitors are often surprised by how little the entries say. For the night of the storm, Anna",
  "wrote only: 'Wind north-west, very strong. Power lost at nine. Lamp kept. No ships.' Asked about",
  "it years later, she said that",
].join(" ");

export const fidelityPrompts: readonly FidelityPrompt[] = [
  { id: "chat-capital", text: chatPrompt(["What is the capital of France?"]) },
  {
    id: "chat-photosynthesis",
    text: chatPrompt(["Explain photosynthesis to a ten-year-old in a few sentences."]),
  },
  {
    id: "chat-python-prime",
    text: chatPrompt(["Write a Python function that checks whether a number is prime."]),
  },
  { id: "chat-arithmetic", text: chatPrompt(["What is 17 multiplied by 23? Show your steps."]) },
  {
    id: "chat-sleep-tips",
    text: chatPrompt(["Give me three tips for sleeping better, as a numbered list."]),
  },
  {
    id: "chat-translate-es",
    text: chatPrompt(['Translate "Good morning, how are you today?" into Spanish.']),
  },
  {
    id: "chat-json",
    text: chatPrompt([
      "Return a JSON object describing a fictional person with the fields name, age and city. Output only JSON.",
    ]),
  },
  {
    id: "chat-pirate",
    text: chatPrompt(
      ["Tell me about the sea."],
      "You are a friendly pirate who always speaks like a pirate.",
    ),
  },
  {
    id: "chat-multiturn",
    text: chatPrompt([
      "I'm planning a trip to Japan in April.",
      "That sounds wonderful! April is cherry blossom season. How can I help you plan?",
      "Which cities should I visit in one week?",
    ]),
  },
  { id: "chat-haiku", text: chatPrompt(["Write a haiku about autumn leaves."]) },
  {
    id: "chat-summarize",
    text: chatPrompt([
      "Summarize in one sentence: The city council voted on Tuesday to extend the bike lane network by " +
        "twelve kilometres over the next two years, funded by a combination of state grants and a small " +
        "increase in parking fees. Opponents argued the plan would hurt local shops.",
    ]),
  },
  {
    id: "raw-history",
    text: "The printing press, developed by Johannes Gutenberg around 1440, changed Europe because",
  },
  {
    id: "raw-python",
    text: 'def fibonacci(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n',
  },
  {
    id: "raw-javascript",
    text: "// Debounce: call fn only after `ms` milliseconds without new calls.\nfunction debounce(fn, ms) {\n",
  },
  { id: "raw-sql", text: "SELECT c.name, COUNT(o.id) AS orders\nFROM customers c\nLEFT JOIN" },
  { id: "raw-math", text: "Solve for x: 3x + 7 = 22.\nStep 1: Subtract 7 from both sides:" },
  { id: "raw-list", text: "Ingredients for pancakes:\n1. 200 g flour\n2." },
  {
    id: "raw-french",
    text: "La Révolution française est une période de bouleversements politiques et sociaux en France qui",
  },
  {
    id: "raw-german-chinese",
    text: "Maschinelles Lernen ist ein Teilgebiet der künstlichen Intelligenz. 机器学习是人工智能的一个分支，",
  },
  {
    id: "raw-json",
    text: '{"users": [{"id": 1, "name": "Alice", "email": "alice@example.com", "active": true}, {"id": 2, ',
  },
  { id: "raw-csv", text: "date,city,temperature_c\n2024-01-01,Oslo,-4.5\n2024-01-01,Madrid,11.2\n" },
  {
    id: "raw-story",
    text: "Once upon a time, in a small village by the sea, there lived an old clockmaker who",
  },
  { id: "raw-long-passage", text: longPassage },
];
