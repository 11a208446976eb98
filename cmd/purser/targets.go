package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/purser-io/purser/internal/cli/client"
)

// target is one thing a command was pointed at: every object of a kind
// (name empty) or one object.
type target struct {
	res  client.Resource
	name string
}

// parseTargets reads arguments as kubectl does: KIND (a list), KIND,KIND,
// KIND NAME [NAME...], or KIND/NAME [KIND/NAME...].
func parseTargets(args []string) ([]target, error) {
	if len(args) == 0 {
		return nil, errors.New("say which kind: runnables, deployables or clusters")
	}
	if strings.Contains(args[0], "/") {
		var ts []target
		for _, a := range args {
			k, n, ok := strings.Cut(a, "/")
			if !ok || n == "" || strings.Contains(n, "/") {
				return nil, fmt.Errorf("%q: give every object as KIND/NAME, or KIND NAME [NAME...]", a)
			}
			r, err := client.ParseResource(k)
			if err != nil {
				return nil, err
			}
			ts = append(ts, target{r, n})
		}
		return ts, nil
	}
	var kinds []client.Resource
	for _, k := range strings.Split(args[0], ",") {
		r, err := client.ParseResource(k)
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, r)
	}
	if len(args) == 1 {
		ts := make([]target, len(kinds))
		for i, r := range kinds {
			ts[i] = target{res: r}
		}
		return ts, nil
	}
	var ts []target
	for _, r := range kinds {
		for _, n := range args[1:] {
			if strings.Contains(n, "/") {
				return nil, fmt.Errorf("%q: give KIND NAME or KIND/NAME, not both", n)
			}
			ts = append(ts, target{r, n})
		}
	}
	return ts, nil
}

// oneNamed is the single object a command acts on (describe, approve).
func oneNamed(args []string) (target, error) {
	ts, err := parseTargets(args)
	if err != nil {
		return target{}, err
	}
	if len(ts) != 1 {
		return target{}, errors.New("give one object: KIND NAME or KIND/NAME")
	}
	if ts[0].name == "" {
		return target{}, fmt.Errorf("say which %s: %s NAME", ts[0].res.Singular(), ts[0].res.Plural)
	}
	return ts[0], nil
}
