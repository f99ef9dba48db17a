/** Chat requests → prompt text through the model's Jinja chat template. */
export { contentText } from "./conversation.ts";
export { type RenderChatOptions, type RenderedChat, renderChat } from "./render.ts";
export { type ChatTemplateSource, loadChatTemplateSource } from "./source.ts";
export type * from "./types.ts";
