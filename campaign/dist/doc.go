// Package dist runs campaigns over many machines through NATS JetStream.
//
// A coordinator generates and mutates programs, publishes them as Work on
// the work-queue stream FFZ_WORK (subject ffz.work.<target kind>, message
// ID <campaign>/<index>, so a republished program is dropped), judges the
// results and keeps everything in JetStream: the campaign state, one Done
// record per program index, the mutation pool, findings (deduplicated by
// signature) and their reproducers, and kernel images by SHA-256.
//
// Workers (`forkfuzz worker`, formerly called agents, which the wire
// fields, JetStream names and metric labels still say) share one durable
// pull consumer per target kind. A worker runs a
// program on its own target, keeps the message alive (InProgress) while it
// runs, publishes the Result on FFZ_RESULTS (subject
// ffz.result.<campaign>, the same message ID, so two workers' results of
// one program are deduplicated by the stream), and acknowledges the work
// only once JetStream has stored the result. Work whose worker dies is
// redelivered after the consumer's AckWait. Workers do not judge.
//
// The coordinator judges each result exactly once. It pulls results and
// hands them to a pool of CoordinatorConfig.Judges goroutines; each, for
// one result, judges it, creates the finding entries (KV Create: the
// first program with a signature wins), puts the program into the pool,
// creates the Done record (KV Create: exactly one per index; a second
// result of the index is counted as a duplicate and dropped) and only
// then acknowledges it. Every step is idempotent, so results are handled
// concurrently and in any order, and a coordinator killed anywhere in
// between, on restart, resumes from the stored state and stores each
// result once.
//
// Minimization: when the coordinator stores a new finding it publishes a
// minimization request (a Work with Minimize set to the signature, on the
// same work subject, message ID <campaign>/min/<finding key>). The worker
// that pulls it reduces the program with campaign.Reduce (which judges its
// own runs) and publishes a MinimizeResult on ffz.result.<campaign>.min
// (same message ID); the coordinator consumes those apart, stores the
// minimized program in the finding's record and rewrites its directory.
// A worker started with --minimize-runs 0 answers that it does not
// minimize. The campaign finishes only when every request is answered; a
// restarted coordinator asks again for every finding of the campaign whose
// record has no answer.
//
// Locking: coord.mu protects the state, the pool, the pending
// minimizations and the statistics; it is never held across a JetStream
// request except in publish's final saveState and produce's finishing
// saveState (short, and the judging goroutines do not need them to make
// progress). A corpus slot's KV write is published (asynchronously) under
// it so that the bucket sees one slot's writes in the pool's order.
// coord.recMu serializes reading and rewriting finding records and
// writing finding directories.
package dist
