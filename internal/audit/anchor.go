package audit

import "time"

// Anchor is the head of the chain as published outside the database (to
// the stream, by internal/anchor): the Seq and Hash of the newest entry at
// PublishedAt. Whoever can rewrite the database can forge a chain that
// verifies on its own; it cannot also change what was published, so an
// entry that no longer has its anchored hash, or a chain that ends before
// an anchored Seq, shows the rewrite.
type Anchor struct {
	Seq         int64     `json:"seq"`
	Hash        string    `json:"hash"`
	PublishedAt time.Time `json:"publishedAt"`
}
