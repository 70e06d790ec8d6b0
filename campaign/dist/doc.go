// Package dist runs campaigns over many machines through NATS JetStream.
//
// A coordinator generates and mutates programs, publishes them as Work on
// the work-queue stream FFZ_WORK (subject ffz.work.<target kind>, message
// ID <campaign>/<index>, so a republished program is dropped), judges the
// results and keeps everything in JetStream: the campaign state, one Done
// record per program index, the mutation pool, findings (deduplicated by
// signature) and their reproducers, and kernel images by SHA-256.
//
// Agents share one durable pull consumer per target kind. An agent runs a
// program on its own target, keeps the message alive (InProgress) while it
// runs and minimizes, publishes the Result on FFZ_RESULTS (subject
// ffz.result.<campaign>, the same message ID, so two agents' results of
// one program are deduplicated by the stream), and acknowledges the work
// only once JetStream has stored the result. Work whose agent dies is
// redelivered after the consumer's AckWait.
//
// The coordinator consumes results in one goroutine and, for each, judges
// it, creates the finding entries (KV Create: the first program with a
// signature wins), puts the program into the pool, creates the Done record
// (KV Create: exactly one per index; a second result of the index is
// counted as a duplicate and dropped) and only then acknowledges it. Every
// step is idempotent, so a coordinator killed anywhere in between, on
// restart, resumes from the stored state and stores each result once.
//
// Locking: coord.mu protects the state, the pool and the statistics; it is
// never held across a JetStream request except in publish's final
// saveState and produce's finishing saveState (short, and the result
// goroutine does not need them to make progress).
package dist
