package printer

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/client-go/util/jsonpath"
)

// SortBy orders items by the value at a field path (--sort-by), as
// kubectl's RuntimeSort does (k8s.io/kubectl/pkg/cmd/get/sorter.go): the
// path is relaxed (.status.phase), objects without the field come first,
// numbers compare as numbers and strings as text (RFC 3339 times so sort
// by time), and a path that no object has is an error, since it is more
// likely a typo than a wish. The sort is stable.
func SortBy(items []Object, expr string) error {
	template, err := RelaxedJSONPath(expr)
	if err != nil {
		return fmt.Errorf("--sort-by: %w", err)
	}
	jp := jsonpath.New("sort").AllowMissingKeys(true)
	if err := jp.Parse(template); err != nil {
		return fmt.Errorf("--sort-by %s: %w", expr, err)
	}
	keys := make([]any, len(items))
	found := false
	for i := range items {
		res, err := jp.FindResults(plain(items[i]))
		if err != nil {
			return fmt.Errorf("--sort-by %s: %w", expr, err)
		}
		if len(res) > 0 && len(res[0]) > 0 {
			keys[i] = res[0][0].Interface()
			found = true
		}
	}
	if !found && len(items) > 0 {
		return fmt.Errorf("--sort-by: no object has a field %s", template)
	}
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	var sortErr error
	slices.SortStableFunc(order, func(a, b int) int {
		c, err := compare(keys[a], keys[b])
		if err != nil && sortErr == nil {
			sortErr = err
		}
		return c
	})
	if sortErr != nil {
		return fmt.Errorf("--sort-by %s: %w", expr, sortErr)
	}
	sorted := make([]Object, len(items))
	for i, o := range order {
		sorted[i] = items[o]
	}
	copy(items, sorted)
	return nil
}

// compare orders two values of a field; nil (missing) first.
func compare(a, b any) (int, error) {
	switch {
	case a == nil && b == nil:
		return 0, nil
	case a == nil:
		return -1, nil
	case b == nil:
		return 1, nil
	}
	fa, aNum := number(a)
	fb, bNum := number(b)
	if aNum && bNum {
		switch {
		case fa < fb:
			return -1, nil
		case fa > fb:
			return 1, nil
		}
		return 0, nil
	}
	sa, aStr := a.(string)
	sb, bStr := b.(string)
	if aStr && bStr {
		switch {
		case sa < sb:
			return -1, nil
		case sa > sb:
			return 1, nil
		}
		return 0, nil
	}
	if ba, ok := a.(bool); ok {
		if bb, ok := b.(bool); ok {
			switch {
			case ba == bb:
				return 0, nil
			case !ba:
				return -1, nil
			}
			return 1, nil
		}
	}
	return 0, fmt.Errorf("cannot order %s and %s values; sort by a field holding a number, a string or a boolean",
		reflect.TypeOf(a).Kind(), reflect.TypeOf(b).Kind())
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// plain returns v with every json.Number turned into int64 (whole) or
// float64, the values a jsonpath filter and a sort compare, as they are in
// Kubernetes' unstructured objects.
func plain(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plain(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	case []Object:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	}
	return v
}
