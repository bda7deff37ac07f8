/** N concurrent streams from their own process: the bench module, shared with the tests. */
export { type ConcurrentStreamsOptions, type ConcurrentStreamsSummary, concurrentStreams } from "../../src/bench/concurrent-streams.ts";
