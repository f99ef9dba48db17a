/** Chat requests → prompt text through the model's Jinja chat template. */
export { contentText } from "./conversation.ts";
export { type RenderChatOptions, type RenderedChat, renderChat } from "./render.ts";
export {
  TEMPLATE_POOL_DEFAULTS,
  TemplatePool,
  type TemplatePoolCounts,
  type TemplatePoolOptions,
} from "./render-pool.ts";
export { type ChatTemplateSource, loadChatTemplateSource, namesModelTemplate } from "./source.ts";
export type * from "./types.ts";
