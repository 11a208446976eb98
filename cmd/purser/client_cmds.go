package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/client"
)

// clientFlags are the connection flags of every client command.
type clientFlags struct {
	server, token string
}

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", "", "purser API URL (default: $PURSER_SERVER, else the client config `purser up` writes)")
	cmd.Flags().StringVar(&f.token, "token", "", "bearer token (default: $PURSER_TOKEN, else the login of purser login, else the client config)")
}

func (f *clientFlags) client() (*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := client.ResolveWithLogin(ctx, client.Config{Server: f.server, Token: f.token})
	if err != nil {
		return nil, err
	}
	return client.New(cfg), nil
}

// kindInfo maps what users type to API paths.
type kindInfo struct {
	kind       string // Runnable
	plural     string // runnables
	namespaced bool
}

var kinds = []kindInfo{
	{v1alpha1.KindRunnable, "runnables", true},
	{v1alpha1.KindDeployable, "deployables", true},
	{v1alpha1.KindCluster, "clusters", false},
}

// parseKind accepts runnable, runnables, Runnable, rn; deployable(s), dp;
// cluster(s).
func parseKind(s string) (kindInfo, error) {
	aliases := map[string]string{"rn": "runnables", "dp": "deployables", "cl": "clusters"}
	low := strings.ToLower(s)
	if a, ok := aliases[low]; ok {
		low = a
	}
	for _, k := range kinds {
		if low == strings.ToLower(k.kind) || low == k.plural {
			return k, nil
		}
	}
	return kindInfo{}, fmt.Errorf("unknown kind %q: use runnables, deployables or clusters", s)
}

// kindAndName reads "KIND NAME" or "KIND/NAME" arguments.
func kindAndName(args []string, nameRequired bool) (kindInfo, string, error) {
	if len(args) == 0 {
		return kindInfo{}, "", errors.New("say which kind: runnables, deployables or clusters")
	}
	kindArg, name := args[0], ""
	if k, n, ok := strings.Cut(args[0], "/"); ok {
		kindArg, name = k, n
		if len(args) > 1 {
			return kindInfo{}, "", errors.New("give KIND/NAME or KIND NAME, not both")
		}
	} else if len(args) > 1 {
		name = args[1]
	}
	if len(args) > 2 {
		return kindInfo{}, "", fmt.Errorf("unexpected arguments: %s", strings.Join(args[2:], " "))
	}
	k, err := parseKind(kindArg)
	if err != nil {
		return k, "", err
	}
	if nameRequired && name == "" {
		return k, "", fmt.Errorf("say which %s: %s NAME", strings.ToLower(k.kind), k.plural)
	}
	return k, name, nil
}

func objectPath(k kindInfo, ns, name string) string {
	if k.namespaced {
		return "/api/v1/" + k.plural + "/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
	}
	return "/api/v1/" + k.plural + "/" + url.PathEscape(name)
}

func newApplyCommand() *cobra.Command {
	var cf clientFlags
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Submit Runnables and create or update Deployables and Clusters from YAML or JSON",
		Long: `Send every object of FILE (YAML documents separated by ---, or JSON; "-" reads
standard input) to the API: a Runnable is submitted (submitting the same one
again changes nothing), a Deployable is created or updated, a Cluster is
registered or updated. Each object gets one line of outcome; errors are shown
as the server wrote them, and the command fails if any object failed.`,
		Example: `  purser apply -f examples/runnable-job.yaml
  cat deployables.yaml | purser apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("-f FILE is required (use - for standard input)")
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			data, err := readFile(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			docs, err := splitDocuments(data)
			if err != nil {
				return err
			}
			if len(docs) == 0 {
				return fmt.Errorf("%s holds no object", file)
			}
			failed := 0
			for i, doc := range docs {
				line, err := applyOne(cmd.Context(), c, doc)
				if err != nil {
					failed++
					fmt.Fprintf(cmd.ErrOrStderr(), "object %d of %s: %v\n", i+1, file, err)
					continue
				}
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d objects failed", failed, len(docs))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "file to apply, - for standard input")
	cf.register(cmd)
	return cmd
}

func readFile(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(path)
}

// splitDocuments splits YAML at lines that are exactly "---" and drops
// empty documents. JSON input is one document.
func splitDocuments(data []byte) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if len(bytes.TrimSpace(stripComments(cur.Bytes()))) > 0 {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if t := bytes.TrimRight(line, " \t\r\n"); bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	return docs, nil
}

func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// applyOne sends one document where its kind goes and describes the outcome.
func applyOne(ctx context.Context, c *client.Client, doc []byte) (string, error) {
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return "", fmt.Errorf("not YAML or JSON: %w", err)
	}
	var out struct {
		Metadata v1alpha1.ObjectMeta `json:"metadata"`
		Status   struct {
			Phase      string `json:"phase"`
			Generation int64  `json:"generation"`
		} `json:"status"`
	}
	const yamlType = "application/yaml"
	switch head.Kind {
	case v1alpha1.KindRunnable:
		code, err := c.Do(ctx, http.MethodPost, "/api/v1/runnables", nil, doc, yamlType, &out)
		if err != nil {
			return "", err
		}
		verb := "submitted"
		if code == http.StatusOK {
			verb = "unchanged (already submitted)"
		}
		return fmt.Sprintf("runnable/%s/%s %s (%s)", out.Metadata.Namespace, out.Metadata.Name, verb, out.Status.Phase), nil
	case v1alpha1.KindDeployable:
		if head.Metadata.Namespace == "" || head.Metadata.Name == "" {
			return "", errors.New("a Deployable needs metadata.namespace and metadata.name")
		}
		k, _ := parseKind("deployables")
		code, err := c.Do(ctx, http.MethodPut, objectPath(k, head.Metadata.Namespace, head.Metadata.Name), nil, doc, yamlType, &out)
		if err != nil {
			return "", err
		}
		verb := "configured"
		if code == http.StatusCreated {
			verb = "created"
		}
		return fmt.Sprintf("deployable/%s/%s %s (generation %d, %s)", head.Metadata.Namespace, head.Metadata.Name, verb, out.Status.Generation, out.Status.Phase), nil
	case v1alpha1.KindCluster:
		k, _ := parseKind("clusters")
		_, err := c.Do(ctx, http.MethodPost, "/api/v1/clusters", nil, doc, yamlType, &out)
		var apiErr *v1alpha1.Status
		if errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict && head.Metadata.Name != "" {
			if _, err := c.Do(ctx, http.MethodPut, objectPath(k, "", head.Metadata.Name), nil, doc, yamlType, &out); err != nil {
				return "", err
			}
			return fmt.Sprintf("cluster/%s configured", head.Metadata.Name), nil
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("cluster/%s registered", out.Metadata.Name), nil
	case "":
		return "", errors.New("the object has no kind")
	default:
		return "", fmt.Errorf("kind %q is not a purser kind (Runnable, Deployable, Cluster); wrap Kubernetes objects in spec.template", head.Kind)
	}
}

func newGetCommand() *cobra.Command {
	var cf clientFlags
	var namespace, output, phase, cluster string
	var all bool
	var limit int
	cmd := &cobra.Command{
		Use:   "get KIND [NAME]",
		Short: "List or show runnables, deployables or clusters",
		Long: `List objects as a table (like kubectl get), or show one. KIND is runnables
(rn), deployables (dp) or clusters. -o yaml|json prints the objects as the
API returns them; -o wide adds columns.`,
		Example: `  purser get runnables -n team-a
  purser get rn -A --phase Running
  purser get runnable nightly-report -n team-a -o yaml
  purser get clusters`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, name, err := kindAndName(args, false)
			if err != nil {
				return err
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var items []map[string]any
			if name != "" {
				var obj map[string]any
				if _, err := c.Do(ctx, http.MethodGet, objectPath(k, namespace, name), nil, nil, "", &obj); err != nil {
					return err
				}
				items = []map[string]any{obj}
			} else {
				q := url.Values{}
				if k.namespaced && !all {
					q.Set("namespace", namespace)
				}
				if phase != "" {
					q.Set("phase", phase)
				}
				if cluster != "" {
					q.Set("cluster", cluster)
				}
				if items, err = listAll(ctx, c, "/api/v1/"+k.plural, q, limit); err != nil {
					return err
				}
			}
			if output == "json" || output == "yaml" {
				var v any = items
				if name != "" {
					v = items[0]
				} else {
					v = map[string]any{"items": items}
				}
				return printStructured(cmd.OutOrStdout(), output, v)
			}
			if len(items) == 0 {
				where := ""
				if k.namespaced && !all {
					where = " in namespace " + namespace
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "No %s found%s.\n", k.plural, where)
				return nil
			}
			return printTable(cmd.OutOrStdout(), k, items, output == "wide", all || !k.namespaced)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list across every namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, yaml or json")
	cmd.Flags().StringVar(&phase, "phase", "", "runnables only: only this phase")
	cmd.Flags().StringVar(&cluster, "cluster", "", "runnables only: only those on this cluster")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many objects (default: all, fetched in pages)")
	cf.register(cmd)
	return cmd
}

func checkOutput(o string) error {
	switch o {
	case "", "wide", "yaml", "json":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use wide, yaml or json", o)
}

// listAll follows continue tokens until the list ends or limit is reached.
func listAll(ctx context.Context, c *client.Client, path string, q url.Values, limit int) ([]map[string]any, error) {
	var all []map[string]any
	for {
		var page struct {
			Items    []map[string]any `json:"items"`
			Continue string           `json:"continue"`
		}
		if _, err := c.Do(ctx, http.MethodGet, path, q, nil, "", &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if limit > 0 && len(all) >= limit {
			return all[:limit], nil
		}
		if page.Continue == "" {
			return all, nil
		}
		q.Set("continue", page.Continue)
	}
}

func printStructured(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}

// field reads a nested value of a decoded object as text.
func field(obj map[string]any, path ...string) string {
	switch v := lookup(obj, path...).(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return fmt.Sprint(int64(v))
	default:
		return fmt.Sprint(v)
	}
}

// lookup walks a decoded object; nil when any step is missing.
func lookup(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// age prints how long ago an RFC 3339 time was, as kubectl does.
func age(ts string) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return "<unknown>"
	}
	d := time.Since(t)
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func printTable(w io.Writer, k kindInfo, items []map[string]any, wide, withNamespace bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	var header []string
	if withNamespace && k.namespaced {
		header = append(header, "NAMESPACE")
	}
	switch k.kind {
	case v1alpha1.KindRunnable:
		header = append(header, "NAME", "KIND", "PHASE", "CLUSTER", "HEALTH", "AGE")
		if wide {
			header = append(header, "ATTEMPTS", "SUBMITTED-BY", "MESSAGE")
		}
	case v1alpha1.KindDeployable:
		header = append(header, "NAME", "KIND", "GENERATION", "PHASE", "SYNCED", "AGE")
		if wide {
			header = append(header, "CLUSTERS")
		}
	case v1alpha1.KindCluster:
		header = append(header, "NAME", "READY", "LABELS", "TAINTS", "OBJECTS", "AGE")
		if wide {
			header = append(header, "LAST-HEARTBEAT")
		}
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, it := range items {
		var row []string
		if withNamespace && k.namespaced {
			row = append(row, field(it, "metadata", "namespace"))
		}
		row = append(row, field(it, "metadata", "name"))
		created := age(field(it, "metadata", "creationTimestamp"))
		switch k.kind {
		case v1alpha1.KindRunnable:
			row = append(row, field(it, "spec", "template", "kind"), field(it, "status", "phase"),
				orNone(field(it, "status", "cluster")), orNone(field(it, "status", "health")), created)
			if wide {
				attempts, _ := lookup(it, "status", "attempts").([]any)
				row = append(row, fmt.Sprint(len(attempts)), field(it, "status", "submittedBy"), field(it, "status", "message"))
			}
		case v1alpha1.KindDeployable:
			synced, total, perCluster := syncSummary(it)
			row = append(row, field(it, "spec", "template", "kind"), field(it, "status", "generation"),
				field(it, "status", "phase"), fmt.Sprintf("%d/%d", synced, total), created)
			if wide {
				row = append(row, orNone(perCluster))
			}
		case v1alpha1.KindCluster:
			labels, _ := lookup(it, "metadata", "labels").(map[string]any)
			taints, _ := lookup(it, "spec", "taints").([]any)
			row = append(row, orUnknown(readyStatus(it)), orNone(joinLabels(labels)), fmt.Sprint(len(taints)),
				orNone(field(it, "status", "inventory", "objects")), created)
			if wide {
				row = append(row, orNone(field(it, "status", "agent", "lastHeartbeat")))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}

func readyStatus(obj map[string]any) string {
	conds, _ := lookup(obj, "status", "conditions").([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == v1alpha1.ConditionReady {
			return fmt.Sprint(m["status"])
		}
	}
	return ""
}

func syncSummary(obj map[string]any) (synced, total int, perCluster string) {
	clusters, _ := lookup(obj, "status", "clusters").([]any)
	var parts []string
	for _, c := range clusters {
		m, _ := c.(map[string]any)
		total++
		if m["state"] == string(v1alpha1.StateSynced) {
			synced++
		}
		parts = append(parts, fmt.Sprintf("%v=%v", m["cluster"], m["state"]))
	}
	return synced, total, strings.Join(parts, ",")
}

func joinLabels(l map[string]any) string {
	parts := make([]string, 0, len(l))
	for k, v := range l {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
