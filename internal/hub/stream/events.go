package stream

import (
	"encoding/json"
	"time"
)

// Event types, as the watch API names them.
const (
	EventAdded    = "ADDED"
	EventModified = "MODIFIED"
	EventDeleted  = "DELETED"
)

// Event is the message an agent publishes on EventsSubject for every
// change it sees. It is a hint for the ingester, ordered by
// ResourceVersion, never trusted over a newer state.
type Event struct {
	Cluster         string            `json:"cluster"`
	APIVersion      string            `json:"apiVersion"`
	Kind            string            `json:"kind"`
	Namespace       string            `json:"namespace,omitempty"`
	Name            string            `json:"name"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Type            string            `json:"type"`
	Labels          map[string]string `json:"labels,omitempty"`
	// Time is when the agent saw the change, by its own clock.
	Time time.Time `json:"time"`
	// Object is the trimmed object; it is left out (and Truncated set)
	// when it would not fit in one stream message (MaxMessage).
	Object    json.RawMessage `json:"object,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
}

// MsgID deduplicates republished events: the same object at the same
// version with the same change is one message however often it is sent.
func (e *Event) MsgID() string {
	return e.Cluster + "/" + e.UID + "/" + e.ResourceVersion + "/" + e.Type
}
