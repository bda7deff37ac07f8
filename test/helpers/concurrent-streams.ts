/** N concurrent streams from their own process: the bench module, shared with the tests. */
export { concurrentStreams, type ConcurrentStreamsOptions, type ConcurrentStreamsSummary } from "../../src/bench/concurrent-streams.ts";
