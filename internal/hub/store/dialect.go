package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Engine names returned by Store.Engine.
const (
	EngineSQLite   = "sqlite"
	EnginePostgres = "postgres"
)

// sqliteTimeLayout is how SQLite stores timestamps: fixed width, so that
// string comparison orders instants, and readable in the sqlite3 shell.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// dialect holds the few differences between the engines that the shared
// SQL cannot absorb. Queries are written once with ? placeholders.
type dialect struct {
	engine string
}

// rebind turns ? placeholders into PostgreSQL's $1, $2, ... The queries in
// this package contain no ? inside literals, so a plain scan suffices; ??
// stands for PostgreSQL's own ? operator (jsonb: has key), in queries for
// PostgreSQL only.
func (d dialect) rebind(q string) string {
	if d.engine != EnginePostgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' && i+1 < len(q) && q[i+1] == '?' {
			b.WriteByte('?')
			i++
			continue
		}
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// ts converts t to the engine's timestamp argument, normalised to UTC and
// microseconds, the precision PostgreSQL keeps, so both engines return
// exactly what they were given.
func (d dialect) ts(t time.Time) any {
	t = truncate(t)
	if d.engine == EnginePostgres {
		return t
	}
	return t.Format(sqliteTimeLayout)
}

// castRow is one row of a VALUES list of len(types) parameters: on
// PostgreSQL each cast to its type, so that a CTE of them has the types
// of the columns it is compared with; on SQLite plain, since a cast there
// converts by affinity (a time cast to TIMESTAMPTZ would become a number).
func (d dialect) castRow(types ...string) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, t := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		if d.engine == EnginePostgres {
			b.WriteString("CAST(? AS " + t + ")")
		} else {
			b.WriteByte('?')
		}
	}
	b.WriteByte(')')
	return b.String()
}

// bulkRows is how many rows one multi-row statement writes at most: well
// under both engines' limits on parameters (SQLite 32,766, PostgreSQL
// 65,535) for the widest rows written so.
const bulkRows = 500

func (d dialect) nullTS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.ts(*t)
}

func truncate(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// timeCol scans a timestamp column of either engine into a UTC time.Time.
type timeCol struct{ dst *time.Time }

func (c timeCol) Scan(v any) error {
	t, err := parseTimeValue(v)
	if err != nil {
		return err
	}
	*c.dst = t
	return nil
}

// nullTimeCol scans a nullable timestamp column; NULL becomes a nil pointer.
type nullTimeCol struct{ dst **time.Time }

func (c nullTimeCol) Scan(v any) error {
	if v == nil {
		*c.dst = nil
		return nil
	}
	t, err := parseTimeValue(v)
	if err != nil {
		return err
	}
	*c.dst = &t
	return nil
}

func parseTimeValue(v any) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x.UTC(), nil
	case string:
		return parseTimeText(x)
	case []byte:
		return parseTimeText(string(x))
	}
	return time.Time{}, fmt.Errorf("store: cannot scan %T into a timestamp", v)
}

func parseTimeText(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: bad timestamp %q: %w", s, err)
	}
	return t.UTC(), nil
}

// nullText is the argument for a nullable JSON TEXT column: nil stays NULL.
// JSON is bound as a string because PostgreSQL rejects bytes for TEXT.
func nullText(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// nullString is the argument for a nullable TEXT column: NULL for "".
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullBlob is the argument for a nullable BLOB/BYTEA column.
func nullBlob(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// Page sizes for lists: a missing limit gets a useful page, and no caller
// can ask for an unbounded one.
const (
	defaultPageSize = 500
	maxPageSize     = 1000
)

func pageLimit(n int) int {
	switch {
	case n <= 0:
		return defaultPageSize
	case n > maxPageSize:
		return maxPageSize
	}
	return n
}

// encodeContinue makes the opaque token for the page after the row whose
// sort key is (namespace, name). Keyset tokens name a position rather than
// an offset, so rows inserted before it do not shift later pages.
func encodeContinue(namespace, name string) string {
	b, _ := json.Marshal([2]string{namespace, name})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(token string) (namespace, name string, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrBadContinue, err)
	}
	var key []string
	if err := json.Unmarshal(raw, &key); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrBadContinue, err)
	}
	if len(key) != 2 {
		return "", "", fmt.Errorf("%w: want 2 key parts, got %d", ErrBadContinue, len(key))
	}
	return key[0], key[1], nil
}

// listPage reads one page of a filtered, keyset-paginated list over a
// table whose sort key is (namespace, name): the rows after the continue
// token cont, at most limit of them, scanned by scan, and the token of the
// next page ("" on the last). It asks for one row more than limit to tell
// whether a next page exists.
func listPage[T any](ctx context.Context, tx *Tx, table, columns string, conds []string, args []any, cont string, limit int,
	scan func(interface{ Scan(...any) error }) (T, error), key func(T) (namespace, name string)) ([]T, string, error) {
	if cont != "" {
		ns, name, err := decodeContinue(cont)
		if err != nil {
			return nil, "", err
		}
		conds = append(conds, "(namespace, name) > (?, ?)")
		args = append(args, ns, name)
	}
	q := "SELECT " + columns + " FROM " + table
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	q += " ORDER BY namespace, name LIMIT ?"
	rows, err := tx.query(ctx, q, append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("list %s: %w", table, classify(err))
	}
	defer rows.Close()
	var items []T
	for rows.Next() {
		item, err := scan(rows)
		if err != nil {
			return nil, "", fmt.Errorf("list %s: %w", table, classify(err))
		}
		items = append(items, item)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list %s: %w", table, classify(err))
	}
	var next string
	if len(items) > limit {
		items = items[:limit]
		next = encodeContinue(key(items[limit-1]))
	}
	return items, next, nil
}

// labelConditions turns a label selector into SQL conditions on the JSON
// labels column of the inventory, so that the database, not the caller,
// filters. Keys and values are bound as arguments, never spliced into the
// text. Each condition means what labels.Selector.Matches means: a record
// without the key matches != and notin.
//
// PostgreSQL: = and in are containment (labels::jsonb @> {"key":
// "value"}), which the GIN index inventory_labels serves; the planner
// picks it or the scan in listing order by the labels' statistics. The
// others are checked per record: that index holds key-value pairs, not
// keys (an index of keys too made a common key, such as app in app=web,
// cost a read of every record's entry), and no index lists what a record
// lacks.
//
// SQLite has no such index, and label rows beside each record made its
// writes 60-70 % slower (docs/inventory.md), so a selector is checked
// on every record of the range, but cheaply: the labels are part of the
// index entries of inventory_list_order, and a substring test for the
// pair as labelsJSON writes it ("key":"value", keys sorted, no spaces)
// rejects most records before json_extract parses the labels of the rest.
// The substring test alone would be exact for valid Kubernetes labels;
// json_extract keeps the answer exact for any.
func (d dialect) labelConditions(sel labels.Selector) ([]string, []any, error) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return []string{"1 = 0"}, nil, nil // a selector that can match nothing
	}
	var conds []string
	var args []any
	for _, r := range reqs {
		var cond string
		var a []any
		var err error
		if d.engine == EnginePostgres {
			cond, a, err = postgresLabelCondition(r)
		} else {
			cond, a, err = sqliteLabelCondition(r)
		}
		if err != nil {
			return nil, nil, err
		}
		conds, args = append(conds, cond), append(args, a...)
	}
	return conds, args, nil
}

func postgresLabelCondition(r labels.Requirement) (string, []any, error) {
	vals := r.Values().List()
	contains := func() (string, []any) {
		ors := make([]string, len(vals))
		args := make([]any, len(vals))
		for i, v := range vals {
			pair, _ := json.Marshal(map[string]string{r.Key(): v})
			ors[i], args[i] = "labels::jsonb @> ?::jsonb", string(pair)
		}
		return "(" + strings.Join(ors, " OR ") + ")", args
	}
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.In:
		cond, args := contains()
		return cond, args, nil
	case selection.NotEquals, selection.NotIn:
		cond, args := contains()
		return "NOT " + cond, args, nil
	case selection.Exists:
		// The has-key operator rather than (labels::jsonb -> key) IS NULL,
		// whose selectivity the planner guesses at 0.5 %: for !key it
		// then read and sorted the whole table for each page.
		return "labels::jsonb ?? ?", []any{r.Key()}, nil
	case selection.DoesNotExist:
		return "NOT labels::jsonb ?? ?", []any{r.Key()}, nil
	}
	return "", nil, fmt.Errorf("label selector operator %q is not supported", r.Operator())
}

func sqliteLabelCondition(r labels.Requirement) (string, []any, error) {
	vals := r.Values().List()
	key, _ := json.Marshal(r.Key())
	path := `$."` + r.Key() + `"`
	// has: some pair of the requirement's values (or, without values, the
	// key) appears in the text; exact: json_extract's verdict.
	var has []string
	var hasArgs []any
	if len(vals) == 0 {
		has, hasArgs = []string{"instr(labels, ?) > 0"}, []any{string(key) + ":"}
	}
	for _, v := range vals {
		value, _ := json.Marshal(v)
		has, hasArgs = append(has, "instr(labels, ?) > 0"), append(hasArgs, string(key)+":"+string(value))
	}
	anyHas := "(" + strings.Join(has, " OR ") + ")"
	valueArgs := []any{path}
	for _, v := range vals {
		valueArgs = append(valueArgs, v)
	}
	in := "json_extract(labels, ?) IN (" + placeholders(len(vals)) + ")"
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.In:
		return anyHas + " AND " + in, append(hasArgs, valueArgs...), nil
	case selection.NotEquals, selection.NotIn:
		// json_extract is NULL without the key, and NOT IN of NULL is NULL.
		return "(NOT " + anyHas + " OR json_extract(labels, ?) IS NULL OR NOT " + in + ")",
			append(append(hasArgs, path), valueArgs...), nil
	case selection.Exists:
		return anyHas + " AND json_extract(labels, ?) IS NOT NULL", append(hasArgs, path), nil
	case selection.DoesNotExist:
		return "(NOT " + anyHas + " OR json_extract(labels, ?) IS NULL)", append(hasArgs, path), nil
	}
	return "", nil, fmt.Errorf("label selector operator %q is not supported", r.Operator())
}

// prefixed qualifies each of a list of columns ("a, b") with a table's
// alias ("r." gives "r.a, r.b"), for a query that joins.
func prefixed(alias, columns string) string {
	fields := strings.Split(columns, ",")
	for i, f := range fields {
		fields[i] = alias + strings.TrimSpace(f)
	}
	return strings.Join(fields, ", ")
}
