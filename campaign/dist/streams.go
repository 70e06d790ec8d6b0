package dist

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Names of the JetStream objects a campaign lives in.
const (
	WorkStream    = "FFZ_WORK"    // work queue: ffz.work.<target kind>
	ResultStream  = "FFZ_RESULTS" // work queue: ffz.result.<campaign>, ffz.result.<campaign>.min
	StateBucket   = "ffz-state"   // campaign name -> State
	DoneBucket    = "ffz-done"    // <campaign>.<index> -> Done: one per program, ever
	FindingBucket = "ffz-findings"
	CorpusBucket  = "ffz-corpus"  // <campaign>.<slot> -> program text (the mutation pool)
	AgentBucket   = "ffz-agents"  // agent -> Heartbeat
	ReproStore    = "ffz-repro"   // finding records (program, observation, minimized, files)
	ObsStore      = "ffz-obs"     // observations too large for a message, until stored
	KernelStore   = "ffz-kernels" // kernel images by SHA-256
	// DedupWindow is how long the streams remember a Nats-Msg-Id.
	DedupWindow = time.Hour
)

func workSubject(kind string) string { return "ffz.work." + kind }
func resultSubject(c string) string  { return "ffz.result." + c }

// minimizedSubject carries a campaign's MinimizeResults (on the result
// stream, beside its Results but consumed apart).
func minimizedSubject(c string) string { return "ffz.result." + c + ".min" }

// minimizeMsgID is the message ID of the request to minimize a finding
// and of its answer: one of each per finding within the dedup window.
func minimizeMsgID(c, sig string) string { return c + "/min/" + FindingKey(sig) }

// WorkerConsumer is the durable consumer all workers of one target kind
// share: each work item goes to one of them; unacknowledged work is
// redelivered after the ack wait.
func WorkerConsumer(kind string) string { return "agents-" + kind }

// corpusSubject is the subject a corpus bucket Put of slot goes to.
func corpusSubject(c string, slot int) string {
	return fmt.Sprintf("$KV.%s.%s.%d", CorpusBucket, c, slot)
}

func doneKey(c string, i int64) string { return fmt.Sprintf("%s.%d", c, i) }

// FindingKey is the findings bucket key of a signature.
func FindingKey(sig string) string {
	h := sha256.Sum256([]byte(sig))
	return hex.EncodeToString(h[:16])
}

// Store is a connection's handles on the campaign's JetStream objects.
type Store struct {
	JS       jetstream.JetStream
	Work     jetstream.Stream
	Results  jetstream.Stream
	State    jetstream.KeyValue
	Done     jetstream.KeyValue
	Findings jetstream.KeyValue
	Corpus   jetstream.KeyValue
	Agents   jetstream.KeyValue
	Repro    jetstream.ObjectStore
	Obs      jetstream.ObjectStore
	Kernels  jetstream.ObjectStore
}

// EnsureStore creates (or opens, unchanged) every stream, bucket and store.
func EnsureStore(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	s := &Store{JS: js}
	var err error
	wrap := func(what string, err error) error { return fmt.Errorf("dist: jetstream %s: %w", what, err) }
	if s.Work, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: WorkStream, Subjects: []string{"ffz.work.>"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Duplicates: DedupWindow,
	}); err != nil {
		return nil, wrap(WorkStream, err)
	}
	if s.Results, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: ResultStream, Subjects: []string{"ffz.result.>"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Duplicates: DedupWindow, MaxMsgSize: DefaultMaxPayload,
	}); err != nil {
		return nil, wrap(ResultStream, err)
	}
	kvs := []struct {
		kv   *jetstream.KeyValue
		name string
		ttl  time.Duration
	}{{&s.State, StateBucket, 0}, {&s.Done, DoneBucket, 0}, {&s.Findings, FindingBucket, 0}, {&s.Corpus, CorpusBucket, 0}, {&s.Agents, AgentBucket, 24 * time.Hour}}
	for _, k := range kvs {
		if *k.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: k.name, Storage: jetstream.FileStorage, TTL: k.ttl}); err != nil {
			return nil, wrap("bucket "+k.name, err)
		}
	}
	if s.Repro, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: ReproStore, Storage: jetstream.FileStorage}); err != nil {
		return nil, wrap("object store "+ReproStore, err)
	}
	if s.Obs, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: ObsStore, Storage: jetstream.FileStorage}); err != nil {
		return nil, wrap("object store "+ObsStore, err)
	}
	if s.Kernels, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: KernelStore, Storage: jetstream.FileStorage}); err != nil {
		return nil, wrap("object store "+KernelStore, err)
	}
	return s, nil
}

// EnsureWorkerConsumer creates the consumer of one target kind's work.
// AckWait is how long an agent may hold a program without a sign of life
// before it goes to another agent (agents extend it while they run).
func EnsureWorkerConsumer(ctx context.Context, js jetstream.JetStream, kind string, ackWait time.Duration) (jetstream.Consumer, error) {
	if ackWait <= 0 {
		ackWait = 30 * time.Second
	}
	c, err := js.CreateOrUpdateConsumer(ctx, WorkStream, jetstream.ConsumerConfig{
		Durable: WorkerConsumer(kind), FilterSubject: workSubject(kind),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: -1,
		MaxAckPending: 100000, MaxWaiting: 4096,
	})
	if err != nil {
		return nil, fmt.Errorf("dist: work consumer for %s: %w", kind, err)
	}
	return c, nil
}

// Open returns the store reached through nc, creating what is missing.
func Open(ctx context.Context, nc *nats.Conn) (*Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("dist: jetstream: %w", err)
	}
	return EnsureStore(ctx, js)
}
