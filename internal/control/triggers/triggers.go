// Package triggers creates the runnables of triggers: at each event of a
// trigger's source (a runnable of its namespace ended, a deployable of
// its namespace rolled out everywhere, a call of its webhook), one
// runnable named after the trigger and the event, created the one way a
// runnable is (internal/domain/submission) with the rights of the
// trigger's author as the policy stands at the event, in one transaction
// with its audit entry and the trigger's status.
//
// Exactly once: the runnable's name is the trigger's and a hash of the
// event's identity (v1alpha1.EventRunName), and the runnables table holds
// a name once. Two loops seeing the same event (two replicas, a restart
// half-way, a webhook retried) both try to create the same name; one
// commits, the other finds it taken and takes the event as done.
//
// Events are read from the store, never from memory: the ended runnables
// of a namespace since the trigger's watermark (kept in its row), and the
// deployables' rollouts against the generations the trigger has dealt
// with. A restart reads them again from where the last pass committed.
package triggers

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// TokenPrefix starts every webhook token, so that one pasted where an
// API token belongs (or the reverse) is told apart at a glance; the
// API's authenticators know none of them.
const TokenPrefix = "pwh_"

// NewToken returns a fresh webhook token and its hash, the only form of
// it that is stored.
func NewToken() (token, hash string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("webhook token: %w", err)
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token), nil
}

// HashToken is the stored form of a webhook token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// tokenLen is the length of every token NewToken makes.
var tokenLen = len(TokenPrefix) + base64.RawURLEncoding.EncodedLen(32)

// WellFormedToken reports whether token has the shape of one NewToken
// makes: one that has not opens no trigger, which the API says without
// reading the store (an API token sent by mistake, a scanner's guess).
func WellFormedToken(token string) bool {
	return len(token) == tokenLen && strings.HasPrefix(token, TokenPrefix)
}

// TokenMatches reports, in constant time, whether token is the one whose
// hash is stored.
func TokenMatches(token, hash string) bool {
	if hash == "" || !WellFormedToken(token) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(HashToken(token)), []byte(hash)) == 1
}

// WebhookPath is where trigger ns/name's webhook is called.
func WebhookPath(ns, name string) string {
	return "/api/v1/triggers/" + ns + "/" + name + "/webhook"
}

// Seen is the trigger loop's memory of the events it dealt with, beside
// the watermark: the generation up to which each deployable's rollouts
// are done, and the runs created lately (a run deleted soon after its
// event is not created again when the event is read again).
type Seen struct {
	Deployables map[string]int64     `json:"deployables,omitempty"`
	Recent      map[string]time.Time `json:"recent,omitempty"`
}

// recentKept is how long, and how many, runs Seen.Recent remembers: well
// past the lookback of the scan of ended runnables.
const (
	recentKept    = time.Hour
	recentMaxRuns = 1000
)

func (s *Seen) remember(run string, at time.Time) {
	if s.Recent == nil {
		s.Recent = map[string]time.Time{}
	}
	s.Recent[run] = at
	for k, t := range s.Recent {
		if at.Sub(t) > recentKept {
			delete(s.Recent, k)
		}
	}
	for len(s.Recent) > recentMaxRuns {
		oldest := ""
		for k, t := range s.Recent {
			if oldest == "" || t.Before(s.Recent[oldest]) {
				oldest = k
			}
		}
		delete(s.Recent, oldest)
	}
}

// Stored is a trigger as stored, decoded.
type Stored struct {
	Obj    *v1alpha1.Trigger
	Author policy.User
	Seen   Seen
}

// Decode reads a stored trigger.
func Decode(rec *store.Trigger) (*Stored, error) {
	var doc store.Document[v1alpha1.TriggerSpec]
	if err := json.Unmarshal(rec.Spec, &doc); err != nil {
		return nil, fmt.Errorf("trigger %s/%s: stored spec: %w", rec.Namespace, rec.Name, err)
	}
	obj := &v1alpha1.Trigger{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindTrigger},
		Metadata: v1alpha1.ObjectMeta{Name: rec.Name, Namespace: rec.Namespace, UID: rec.UID, Labels: doc.Labels, Annotations: doc.Annotations,
			ResourceVersion: fmt.Sprint(rec.ResourceVersion), CreationTimestamp: rec.CreatedAt},
		Spec: doc.Spec,
	}
	if len(rec.Status) > 0 {
		if err := json.Unmarshal(rec.Status, &obj.Status); err != nil {
			return nil, fmt.Errorf("trigger %s/%s: stored status: %w", rec.Namespace, rec.Name, err)
		}
	}
	if obj.Spec.Source.Webhook != nil {
		obj.Status.WebhookPath = WebhookPath(rec.Namespace, rec.Name)
	}
	out := &Stored{Obj: obj}
	if doc.Author != nil {
		out.Author = policy.User{Name: doc.Author.Name, Groups: slices.Clone(doc.Author.Groups)}
	}
	if len(rec.Seen) > 0 {
		if err := json.Unmarshal(rec.Seen, &out.Seen); err != nil {
			return nil, fmt.Errorf("trigger %s/%s: stored events seen: %w", rec.Namespace, rec.Name, err)
		}
	}
	return out, nil
}
