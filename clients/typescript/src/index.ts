export { EpisodicClient, evidenceBlocks, newEventId } from "./client.js";
export type { AuditQuery, ClientOptions, RecallOptions, RetryPolicy, TimelineQuery, WriteOptions } from "./client.js";
export * from "./errors.js";
export type * from "./types.js";
