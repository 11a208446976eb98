package triggers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// PutResult is what Put did.
type PutResult int

// What Put did.
const (
	PutUnchanged PutResult = iota + 1
	PutChanged
	PutCreated
)

// Put writes trigger obj (defaults applied, validated) in tx, as author:
// a new one, or the new spec of the one there, provided it is still at
// obj's metadata.resourceVersion when that is set (store.ErrConflict
// otherwise). A new trigger with a webhook gets its token, returned here
// once and stored only as its hash. Its watch starts at now when it is
// created and when its source changes: events before are not its. The
// same spec from the same author writes nothing (PutUnchanged).
func Put(ctx context.Context, tx *store.Tx, obj *v1alpha1.Trigger, author policy.User, now time.Time) (*store.Trigger, PutResult, string, error) {
	ns, name := obj.Metadata.Namespace, obj.Metadata.Name
	cur, err := tx.Triggers().Get(ctx, ns, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, 0, "", err
	}
	doc, err := json.Marshal(store.Document[v1alpha1.TriggerSpec]{Labels: obj.Metadata.Labels, Annotations: obj.Metadata.Annotations,
		Spec: obj.Spec, Author: &store.Author{Name: author.Name, Groups: author.Groups}})
	if err != nil {
		return nil, 0, "", err
	}
	if cur == nil {
		if obj.Metadata.ResourceVersion != "" {
			return nil, 0, "", fmt.Errorf("trigger %s/%s does not exist, so it is at no resourceVersion %s: %w", ns, name, obj.Metadata.ResourceVersion, store.ErrNotFound)
		}
		rec := &store.Trigger{UID: uuid.NewString(), Namespace: ns, Name: name, Spec: doc, Watermark: now}
		var token string
		if obj.Spec.Source.Webhook != nil {
			if token, rec.TokenHash, err = NewToken(); err != nil {
				return nil, 0, "", err
			}
		}
		if rec.Seen, err = baseline(ctx, tx, obj, Seen{}); err != nil {
			return nil, 0, "", err
		}
		return rec, PutCreated, token, tx.Triggers().Create(ctx, rec)
	}
	if rv := obj.Metadata.ResourceVersion; rv != "" && rv != strconv.FormatInt(cur.ResourceVersion, 10) {
		return nil, 0, "", fmt.Errorf("trigger %s/%s is at resourceVersion %d, not %s: %w", ns, name, cur.ResourceVersion, rv, store.ErrConflict)
	}
	if bytes.Equal(cur.Spec, doc) {
		return cur, PutUnchanged, "", nil
	}
	old, err := Decode(cur)
	if err != nil {
		return nil, 0, "", err
	}
	var token string
	if !reflect.DeepEqual(old.Obj.Spec.Source, obj.Spec.Source) {
		// A new source watches from now: the events of the old one are
		// not the new one's.
		cur.Watermark = now
		if cur.Seen, err = baseline(ctx, tx, obj, old.Seen); err != nil {
			return nil, 0, "", err
		}
		if obj.Spec.Source.Webhook == nil {
			cur.TokenHash = ""
		} else if cur.TokenHash == "" {
			if token, cur.TokenHash, err = NewToken(); err != nil {
				return nil, 0, "", err
			}
		}
	}
	cur.Spec = doc
	return cur, PutChanged, token, tx.Triggers().Update(ctx, cur)
}

// Rotate gives trigger ns/name's webhook a new token, which it returns
// once; the old one stops working in the same commit. Whoever rotates
// the token holds it, and so decides when the trigger fires: she becomes
// its author, as by a PUT, so that its events run with her rights, not
// with those of a writer with more (who made the trigger in her
// namespace and gave its token to someone else). rv, when set, is the
// resourceVersion the caller judged the trigger at (store.ErrConflict
// when it moved since).
func Rotate(ctx context.Context, tx *store.Tx, ns, name, rv string, author policy.User) (*store.Trigger, string, error) {
	cur, err := tx.Triggers().Get(ctx, ns, name)
	if err != nil {
		return nil, "", err
	}
	if rv != "" && rv != strconv.FormatInt(cur.ResourceVersion, 10) {
		return nil, "", fmt.Errorf("trigger %s/%s is at resourceVersion %d, not %s: %w", ns, name, cur.ResourceVersion, rv, store.ErrConflict)
	}
	var doc store.Document[v1alpha1.TriggerSpec]
	if err := json.Unmarshal(cur.Spec, &doc); err != nil {
		return nil, "", fmt.Errorf("trigger %s/%s: stored spec: %w", ns, name, err)
	}
	if doc.Spec.Source.Webhook == nil {
		return nil, "", ErrNoWebhook
	}
	doc.Author = &store.Author{Name: author.Name, Groups: author.Groups}
	if cur.Spec, err = json.Marshal(doc); err != nil {
		return nil, "", err
	}
	token, hash, err := NewToken()
	if err != nil {
		return nil, "", err
	}
	cur.TokenHash = hash
	return cur, token, tx.Triggers().Update(ctx, cur)
}

// ErrNoWebhook is a rotation of the token of a trigger whose source is not a webhook.
var ErrNoWebhook = errors.New("the trigger has no webhook (spec.source.webhook)")

// baseline is what a trigger on rollouts takes as already dealt with
// when it starts to watch: the generation of each matching deployable
// that is rolled out everywhere now. A rollout that completes later,
// of a generation under way now or a new one, fires it.
func baseline(ctx context.Context, tx *store.Tx, obj *v1alpha1.Trigger, seen Seen) ([]byte, error) {
	seen.Deployables = nil
	if src := obj.Spec.Source.DeployableRolledOut; src != nil {
		done, err := RolledOut(ctx, tx, obj.Metadata.Namespace, src)
		if err != nil {
			return nil, err
		}
		for _, d := range done {
			if seen.Deployables == nil {
				seen.Deployables = map[string]int64{}
			}
			seen.Deployables[d.UID] = d.Generation
		}
	}
	if seen.Deployables == nil && seen.Recent == nil {
		return nil, nil
	}
	return json.Marshal(seen)
}

// Deployment is one deployable's generation rolled out on every one of
// its clusters.
type Deployment struct {
	UID, Name  string
	Generation int64
}

// RolledOut lists the deployables of ns that src selects whose current
// generation is synced on every one of their clusters (and that have at
// least one), as the store records the rollout.
func RolledOut(ctx context.Context, tx *store.Tx, ns string, src *v1alpha1.DeployableRolledOutSource) ([]Deployment, error) {
	var sel labels.Selector
	if src.Selector != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(src.Selector); err != nil {
			return nil, err
		}
	}
	var out []Deployment
	f := store.DeployableFilter{Namespace: ns, Limit: 1000}
	for {
		recs, next, err := tx.Deployables().List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if rec.DeletedAt != nil || (src.Name != "" && rec.Name != src.Name) {
				continue
			}
			if sel != nil {
				var doc store.Document[json.RawMessage]
				if err := json.Unmarshal(rec.Spec, &doc); err != nil {
					return nil, fmt.Errorf("deployable %s/%s: stored spec: %w", rec.Namespace, rec.Name, err)
				}
				if !sel.Matches(labels.Set(doc.Labels)) {
					continue
				}
			}
			sts, err := tx.Deployables().ListStatus(ctx, rec.UID)
			if err != nil {
				return nil, err
			}
			if everywhere(sts, rec.Generation) {
				out = append(out, Deployment{UID: rec.UID, Name: rec.Name, Generation: rec.Generation})
			}
		}
		if next == "" {
			return out, nil
		}
		f.Continue = next
	}
}

// everywhere: generation gen is synced on each of the clusters, and
// there is at least one.
func everywhere(sts []*store.DeployableClusterStatus, gen int64) bool {
	for _, st := range sts {
		if st.State != string(v1alpha1.StateSynced) || st.SyncedGeneration < gen {
			return false
		}
	}
	return len(sts) > 0
}
