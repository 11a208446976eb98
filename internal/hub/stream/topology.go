package stream

import (
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Streams, subjects, consumers and buckets. Stream names are upper case by
// NATS habit; subjects share the "purser." root so that an operator can
// grant one permission for the whole control plane on a shared cluster.
const (
	// SubmissionsStream holds runnables waiting to be placed. Work-queue
	// retention: a message is removed once a submitter acknowledges it, so
	// competing submitters never place the same submission twice.
	SubmissionsStream = "SUBMISSIONS"
	// SubjectSubmissions is the only subject of SubmissionsStream.
	SubjectSubmissions = "purser.submissions"

	// EventsStream holds the agents' create/update/delete events, one
	// subject per member cluster (see EventsSubject).
	EventsStream = "EVENTS"
	// EventsSubjects matches the events of every cluster, for consumers.
	EventsSubjects = eventsPrefix + ">"

	// SnapshotsStream holds the agents' periodic lists of tracked objects,
	// one subject per member cluster (see SnapshotsSubject).
	SnapshotsStream = "SNAPSHOTS"
	// SnapshotsSubjects matches the snapshots of every cluster.
	SnapshotsSubjects = snapshotsPrefix + ">"

	// AuditStream keeps the heads of the audit chain published by the api
	// (internal/hub/anchor), so that a rewrite of the database's chain shows.
	// It keeps them for good and refuses deletes and purges.
	AuditStream = "AUDIT"
	// SubjectAuditAnchors is the only subject of AuditStream.
	SubjectAuditAnchors = "purser.audit.anchors"

	// HeartbeatsBucket holds each agent's last heartbeat, keyed by cluster.
	HeartbeatsBucket = "purser-heartbeats"
	// LeasesBucket holds the leases that let a cut-off agent know it must
	// fence its work before the controller places it elsewhere.
	LeasesBucket = "purser-leases"
	// KindsBucket holds, per cluster, the kinds its kube-apiserver serves
	// and their scope (ServedKinds), as its agent last discovered them.
	KindsBucket = "purser-kinds"
	// AgentSettingsBucket holds, per cluster, what the hub asks of its
	// agent (AgentSettings), from the Cluster's spec; the API writes it
	// through its outbox, with the change of the Cluster.
	AgentSettingsBucket = "purser-agent-settings"

	// SubmitterConsumer is the durable consumer shared by all submitters
	// on SubmissionsStream.
	SubmitterConsumer = "submitter"
	// IngesterConsumer is the durable consumer shared by all ingesters;
	// it exists on both EventsStream and SnapshotsStream.
	IngesterConsumer = "ingester"
)

// MaxMessage keeps every message under NATS's default 1 MiB payload limit
// with room for headers: an event leaves its object out beyond it, and a
// snapshot is split into chunks under it.
const MaxMessage = 900 << 10

const (
	eventsPrefix    = "purser.events."
	snapshotsPrefix = "purser.snapshots."

	// duplicateWindow is how long JetStream remembers message ids. It must
	// cover a relay's crash between publishing and deleting an outbox row
	// plus its restart; a longer window costs server memory per message.
	duplicateWindow = 2 * time.Minute

	// Events older than a day are useless: the inventory has been
	// corrected by snapshots many times over by then.
	eventsMaxAge = 24 * time.Hour
	// Only the latest snapshot of a cluster matters; an hour of them is
	// enough for an ingester that was down for a while to catch up.
	snapshotsMaxAge = time.Hour
	// DefaultStoreBytes is Config.StoreBytes when it is not set: a NATS
	// server's store must hold at least this much for purser.
	DefaultStoreBytes = 4 << 30
	// MinStoreBytes is the least store purser's streams run in: a quarter
	// of it holds a few snapshots of a large cluster.
	MinStoreBytes = 64 << 20
	// An agent silent for this long is gone; its key expires so that the
	// bucket lists only live agents.
	heartbeatTTL = 5 * time.Minute

	// ackWait is how long a consumer may hold a message before JetStream
	// redelivers it to another replica. Long work reports progress
	// (InProgress) rather than relying on a longer wait, so that a crashed
	// replica's messages move on quickly.
	ackWait = 30 * time.Second
)

// EventsSubject is the subject on which the agent of cluster publishes its
// events. The wildcard of the stream is ">" rather than "*" so that a
// cluster name containing dots still lands in the stream; a name must not
// contain whitespace or the wildcards "*" and ">".
func EventsSubject(cluster string) string { return eventsPrefix + cluster }

// SnapshotsSubject is the subject on which the agent of cluster publishes
// its snapshots.
func SnapshotsSubject(cluster string) string { return snapshotsPrefix + cluster }

// ClusterOf returns the cluster named by an events or snapshots subject, so
// that consumers of the wildcard subjects never parse subjects themselves.
func ClusterOf(subject string) (string, bool) {
	for _, prefix := range []string{eventsPrefix, snapshotsPrefix} {
		if cluster, ok := strings.CutPrefix(subject, prefix); ok && cluster != "" {
			return cluster, true
		}
	}
	return "", false
}

// consumerDecl names the stream a consumer belongs to; consumer names are
// scoped by stream, which is why "ingester" can exist twice.
type consumerDecl struct {
	stream string
	config jetstream.ConsumerConfig
}

// topology is purser's whole JetStream layout for a given replication
// factor, as plain values so that a test can read it without a server.
type topology struct {
	streams   []jetstream.StreamConfig
	consumers []consumerDecl
	buckets   []jetstream.KeyValueConfig
}

func newTopology(replicas int, storeBytes int64) topology {
	stream := func(name, description string, subjects []string, retention jetstream.RetentionPolicy, maxAge time.Duration) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: description,
			Subjects:    subjects,
			Retention:   retention,
			MaxAge:      maxAge,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
			Duplicates:  duplicateWindow,
		}
	}
	bounded := func(cfg jetstream.StreamConfig, maxBytes int64) jetstream.StreamConfig {
		cfg.MaxBytes, cfg.Discard = maxBytes, jetstream.DiscardOld
		return cfg
	}
	consumer := func(name, description string) jetstream.ConsumerConfig {
		// MaxDeliver stays unlimited (the zero value): a message that keeps
		// failing is a bug to see in metrics, never work to drop silently.
		return jetstream.ConsumerConfig{
			Durable:       name,
			Description:   description,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       ackWait,
		}
	}
	return topology{
		streams: []jetstream.StreamConfig{
			stream(SubmissionsStream, "runnables waiting to be placed on a cluster",
				[]string{SubjectSubmissions}, jetstream.WorkQueuePolicy, 0),
			bounded(stream(EventsStream, "agents' object events, one subject per cluster",
				[]string{EventsSubjects}, jetstream.LimitsPolicy, eventsMaxAge), storeBytes/2),
			bounded(stream(SnapshotsStream, "agents' periodic snapshots, one subject per cluster",
				[]string{SnapshotsSubjects}, jetstream.LimitsPolicy, snapshotsMaxAge), storeBytes/4),
			auditStream(stream(AuditStream, "heads of the audit chain, kept outside the database",
				[]string{SubjectAuditAnchors}, jetstream.LimitsPolicy, 0)),
		},
		consumers: []consumerDecl{
			{SubmissionsStream, consumer(SubmitterConsumer, "submitters competing for submissions")},
			{EventsStream, consumer(IngesterConsumer, "ingesters keeping the inventory")},
			{SnapshotsStream, consumer(IngesterConsumer, "ingesters removing zombie records")},
		},
		buckets: []jetstream.KeyValueConfig{
			{
				Bucket:      HeartbeatsBucket,
				Description: "last heartbeat of each agent",
				History:     1,
				TTL:         heartbeatTTL,
				Storage:     jetstream.FileStorage,
				Replicas:    replicas,
			},
			{
				Bucket:      KindsBucket,
				Description: "kinds each member cluster serves, with their scope",
				History:     1,
				Storage:     jetstream.FileStorage,
				Replicas:    replicas,
			},
			{
				Bucket:      AgentSettingsBucket,
				Description: "what the hub asks of each cluster's agent (the kinds it tracks on request)",
				History:     1,
				Storage:     jetstream.FileStorage,
				Replicas:    replicas,
			},
			{
				Bucket:      LeasesBucket,
				Description: "agents' leases on their clusters' work",
				History:     1,
				Storage:     jetstream.FileStorage,
				Replicas:    replicas,
			},
		},
	}
}

// auditStream makes cfg append-only: no message may be deleted, nor the
// stream purged, through the JetStream API.
func auditStream(cfg jetstream.StreamConfig) jetstream.StreamConfig {
	cfg.DenyDelete, cfg.DenyPurge = true, true
	return cfg
}
