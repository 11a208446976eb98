package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
)

// clusterArg reads "cluster NAME" or "cluster/NAME" at the head of args
// and returns the name and the arguments after it.
// oneClusterArg is the cluster of a command that takes one and nothing
// else: NAME, cluster NAME or cluster/NAME.
func oneClusterArg(args []string) (string, error) {
	if len(args) != 2 && !strings.Contains(args[0], "/") {
		return args[0], nil
	}
	name, rest, err := clusterArg(args)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected arguments: %v", rest)
	}
	return name, err
}

func clusterArg(args []string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, errors.New("say which cluster: cluster NAME")
	}
	kind, name, slash := strings.Cut(args[0], "/")
	rest := args[1:]
	if !slash {
		if len(args) < 2 {
			return "", nil, errors.New("say which cluster: cluster NAME")
		}
		name, rest = args[1], args[2:]
	}
	r, err := client.ParseResource(kind)
	if err != nil {
		return "", nil, err
	}
	if r.Kind != v1alpha1.KindCluster {
		return "", nil, fmt.Errorf("only clusters take labels and taints this way; change a %s's labels in its file and apply it", r.Singular())
	}
	if name == "" {
		return "", nil, errors.New("say which cluster: cluster NAME")
	}
	return name, rest, nil
}

// clusterEdit is one change to a cluster that label or taint parsed: how
// to apply it to the cluster as read, and the word that says what it did.
type clusterEdit struct {
	apply func(cl *v1alpha1.Cluster) (changed bool, err error)
	verb  func(changed bool) string
}

// runClusterEdit is what label and taint share: the cluster argument, the
// edit parse makes of the rest, applied by reading the cluster and writing
// it back with its resourceVersion, and one line saying what happened.
func runClusterEdit(cmd *cobra.Command, cf *clientFlags, args []string, parse func(rest []string) (clusterEdit, error)) error {
	name, rest, err := clusterArg(args)
	if err != nil {
		return err
	}
	edit, err := parse(rest)
	if err != nil {
		return err
	}
	c, err := cf.client(cmd)
	if err != nil {
		return err
	}
	_, changed, err := c.EditCluster(cmd.Context(), name, edit.apply)
	if err != nil {
		return named(c, err)
	}
	fmt.Fprintf(stdout(cmd), "cluster/%s %s\n", name, edit.verb(changed))
	return nil
}

func newLabelCommand() *cobra.Command {
	var cf clientFlags
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "label cluster NAME KEY=VALUE... | KEY-...",
		Short: "Set or remove a cluster's labels",
		Long: `Set (key=value) or remove (key-) labels of a registered cluster, as kubectl
label does for nodes. Placement selects clusters by their labels. Changing
the value of a label needs --overwrite. The cluster is read and written back
with its resourceVersion, so a change made meanwhile is never undone; its
kubeconfig is kept. A restart of purser up keeps what is set here.`,
		Example: `  purser label cluster sandbox-1 tier=prod
  purser label cluster sandbox-1 tier=staging --overwrite
  purser label cluster sandbox-1 tier-`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runClusterEdit(cmd, &cf, args, func(rest []string) (clusterEdit, error) {
				edit, err := client.ParseLabelEdit(rest, overwrite)
				return clusterEdit{
					apply: func(cl *v1alpha1.Cluster) (bool, error) {
						labels, changed, err := edit.Apply(cl.Metadata.Labels)
						cl.Metadata.Labels = labels
						return changed, err
					},
					verb: func(changed bool) string { return map[bool]string{true: "labeled", false: "unchanged"}[changed] },
				}, err
			})
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "change the value of a label that is set")
	cf.register(cmd)
	return cmd
}

func newTaintCommand() *cobra.Command {
	var cf clientFlags
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "taint cluster NAME KEY[=VALUE]:EFFECT... | KEY[:EFFECT]-...",
		Short: "Add or remove a cluster's taints",
		Long: `Add (key=value:Effect) or remove (key:Effect-, or key- for every effect)
taints of a registered cluster, as kubectl taint does for nodes. Effects:
NoSchedule (no new runnable is placed there), PreferNoSchedule (placement
only prefers other clusters), NoExecute (the runnables there also fail
over). Deployables leave a cluster with a NoSchedule or NoExecute taint they
do not tolerate. Objects tolerate taints with spec.placement.clusterTolerations.
The taints purser adds itself from a cluster's health (purser.io/...) are
not changed here. Changing a taint's value needs --overwrite.`,
		Example: `  purser taint cluster sandbox-1 maintenance=planned:NoSchedule
  purser taint cluster sandbox-1 maintenance-`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runClusterEdit(cmd, &cf, args, func(rest []string) (clusterEdit, error) {
				edit, err := client.ParseTaintEdit(rest, overwrite)
				return clusterEdit{
					apply: func(cl *v1alpha1.Cluster) (bool, error) {
						taints, changed, err := edit.Apply(cl.Spec.Taints)
						cl.Spec.Taints = taints
						return changed, err
					},
					verb: func(changed bool) string {
						switch {
						case changed && len(edit.Add) > 0 && len(edit.Remove) > 0:
							return "modified"
						case changed && len(edit.Add) > 0:
							return "tainted"
						case changed:
							return "untainted"
						}
						return "unchanged"
					},
				}, err
			})
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "change the value of a taint that is set")
	cf.register(cmd)
	return cmd
}

// newCordonCommand is cordon or uncordon (drain is move.go's): what the
// console's buttons of the same names do, purser's maintenance taint
// (v1alpha1.TaintCordon) set to NoSchedule, or removed.
func newCordonCommand(verb string) *cobra.Command {
	var cf clientFlags
	effect, done, short := corev1.TaintEffectNoSchedule, "cordoned", "Keep new work away from a cluster (taint "+v1alpha1.TaintCordon+":NoSchedule)"
	if verb == "uncordon" {
		effect, done, short = "", "uncordoned", "Let work go to a cordoned or drained cluster again"
	}
	cmd := &cobra.Command{
		Use:   verb + " [cluster] NAME",
		Short: short,
		Long: short + `.

Cordon sets the taint ` + v1alpha1.TaintCordon + `:NoSchedule: no new runnable is placed
on the cluster, and the runnables there stay. Drain (purser drain --help)
moves the runnables there to other clusters by planned moves, then sets it
to NoExecute: whatever is left fails over by its failover policy. Deployables that do not tolerate
the taint are removed from the cluster by either (docs/syncer.md). Uncordon
removes the taint. These are the console's Cordon, Drain and Uncordon
buttons.`,
		Example: "  purser " + verb + " sandbox-1",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := oneClusterArg(args)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			_, changed, err := c.EditCluster(cmd.Context(), name, func(cl *v1alpha1.Cluster) (bool, error) {
				var changed bool
				cl.Spec.Taints, changed = client.Cordon(cl.Spec.Taints, effect)
				return changed, nil
			})
			if err != nil {
				return named(c, err)
			}
			if !changed {
				done = "already " + done
			}
			fmt.Fprintf(stdout(cmd), "cluster/%s %s\n", name, done)
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}
