// Package stream is purser's half of the hub that is not the database: the
// NATS JetStream streams, consumers and key-value buckets that carry
// submissions from the outbox to the submitters, events and snapshots from
// the agents to the ingester, and heartbeats and leases between agents and
// the controller.
//
// Every name and every retention rule is declared here, in one place, so
// that a component never creates a stream of its own and a change of
// retention is reviewed once. Components publish through [Client.Publish]
// (which always deduplicates by message id, the property the outbox relay
// and the agents rely on) and consume through [Client.JetStream] with the
// durable consumer names declared here.
//
// For one machine, [StartEmbedded] runs nats-server inside the purser
// process; beyond it, [Connect] talks to a NATS cluster and [Config]
// asks for replicated streams.
package stream
