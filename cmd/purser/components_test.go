package main

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/api/kubeapi"
	"github.com/purser-io/purser/internal/compose"
	"github.com/purser-io/purser/internal/compose/up"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
)

// flagSet is a subcommand's flags: what it registers, and the Config it
// makes of them.
type flagSet interface {
	register(cmd *cobra.Command)
	config() (compose.Config, error)
}

// splitConfig is the Config a subcommand makes of args.
func splitConfig(t *testing.T, f flagSet, args ...string) compose.Config {
	t.Helper()
	cmd := &cobra.Command{}
	f.register(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// built is what a path built: each component's description, and the
// metrics its registry holds once built.
type built struct {
	desc    map[string]compose.Description
	metrics map[string]map[string]bool // by the hub's name
}

func (b *built) add(t *testing.T, h *compose.Hub, hubName string, d compose.Description) {
	t.Helper()
	b.desc[d.Component] = d
	families, err := h.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if b.metrics[hubName] == nil {
		b.metrics[hubName] = map[string]bool{}
	}
	for _, f := range families {
		b.metrics[hubName][f.GetName()] = true
	}
}

// openHub opens a hub and closes it when the test ends.
func openHub(t *testing.T, cfg compose.HubConfig) *compose.Hub {
	t.Helper()
	h, err := compose.OpenHub(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// buildAll builds on hub (one per component when hub is nil: the split
// deployment) every component of cfgs but the agent, which needs a
// member cluster.
func buildAll(t *testing.T, cfgs map[string]compose.Config, shared *compose.Hub) built {
	t.Helper()
	b := built{desc: map[string]compose.Description{}, metrics: map[string]map[string]bool{}}
	for _, name := range []string{"api", "submitter", "syncer", "ingester", "controller"} {
		cfg := cfgs[name]
		h := shared
		if h == nil {
			h = openHub(t, cfg.Hub)
		}
		var d compose.Description
		var err error
		switch name {
		case "api":
			var a *compose.APIServer
			if a, err = compose.API(t.Context(), h, cfg.API); err == nil {
				t.Cleanup(a.Close)
				d = a.Describe()
			}
		default:
			build := map[string]func() (*compose.Component, error){
				"submitter":  func() (*compose.Component, error) { return compose.Submitter(h, cfg.Submitter) },
				"syncer":     func() (*compose.Component, error) { return compose.Syncer(h, cfg.Syncer) },
				"ingester":   func() (*compose.Component, error) { return compose.Ingester(h, cfg.Ingester) },
				"controller": func() (*compose.Component, error) { return compose.Controller(h, cfg.Controller) },
			}[name]
			var c *compose.Component
			if c, err = build(); err == nil {
				d = c.Describe()
			}
		}
		if err != nil {
			t.Fatalf("build the %s: %v", name, err)
		}
		b.add(t, h, cfg.Hub.Name, d)
	}
	return b
}

// TestUpAndSplitComposeAlike: `purser up` and the split subcommands, with
// their flags' defaults, build every component alike on either engine:
// group commit on PostgreSQL only, the guard in every component that acts
// on the hub, the API's limits, and the guard's and the API's metrics in
// the registry. Up's database is swapped for the engine's: the builder
// decides what the engine gets, not up.
func TestUpAndSplitComposeAlike(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			dir := t.TempDir()
			writeAPIFiles(t, dir) // the files up writes, by up's names
			nats := streamtest.Start(t, "")
			dsn := eng.NewDSN(t)
			hub := []string{"--database", dsn, "--nats", nats.URL, "--key-file", filepath.Join(dir, up.KeyFile)}
			split := buildAll(t, map[string]compose.Config{
				"api": splitConfig(t, &apiFlags{}, append(slices.Clone(hub), "--listen", "127.0.0.1:0",
					"--tokens", filepath.Join(dir, up.TokensFile), "--policy", filepath.Join(dir, up.PolicyFile),
					"--audit-key", filepath.Join(dir, up.AuditKeyFile))...),
				"submitter":  splitConfig(t, &submitterFlags{}, append(slices.Clone(hub), "--policy", filepath.Join(dir, up.PolicyFile))...),
				"syncer":     splitConfig(t, &syncerFlags{}, append(slices.Clone(hub), "--policy", filepath.Join(dir, up.PolicyFile))...),
				"ingester":   splitConfig(t, &ingesterFlags{}, hub...),
				"controller": splitConfig(t, &controllerFlags{}, "--database", dsn, "--key-file", filepath.Join(dir, up.KeyFile), "--policy", filepath.Join(dir, up.PolicyFile)),
			}, nil)

			embedded, err := stream.StartEmbedded(t.Context(), stream.EmbeddedConfig{Dir: t.TempDir(), NoListen: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(embedded.Shutdown)
			upCfg := up.Compose(up.Config{Listen: "127.0.0.1:0"}, dir)
			upCfg.Hub.Database, upCfg.Hub.Embedded = eng.NewDSN(t), embedded
			upHub := openHub(t, upCfg.Hub)
			all := map[string]compose.Config{}
			for _, name := range []string{"api", "submitter", "syncer", "ingester", "controller"} {
				all[name] = upCfg
			}
			upBuilt := buildAll(t, all, upHub)

			for name, want := range split.desc {
				if got := upBuilt.desc[name]; got != want {
					t.Errorf("%s: up builds %+v, the split deployment %+v", name, got, want)
				}
			}
			api := split.desc["api"]
			if api.GroupCommit != storetest.IsPostgres(dsn) {
				t.Errorf("the api commits in groups: %v, on %s", api.GroupCommit, eng.Name)
			}
			if api.UserRate != compose.DefaultUserRate || api.UserBurst != 2*compose.DefaultUserRate {
				t.Errorf("the api's user limits: %v a second, %d at once", api.UserRate, api.UserBurst)
			}
			if api.KubeWatchesPerUser != kubeapi.DefaultWatchesPerUser || api.KubeRequestsPerUser != kubeapi.DefaultRequestsPerUser {
				t.Errorf("the api's caps per user under /k8s: %d watches, %d requests", api.KubeWatchesPerUser, api.KubeRequestsPerUser)
			}
			for _, name := range []string{"api", "submitter", "syncer", "controller"} {
				if !split.desc[name].Guarded {
					t.Errorf("the %s acts without the guard", name)
				}
			}

			upMetrics := upBuilt.metrics["up"]
			for _, m := range []string{"purser_hub_reached", "purser_api_inventory_watches", "go_goroutines"} {
				if !split.metrics["api"][m] {
					t.Errorf("purser api's registry lacks %s: %v", m, slices.Sorted(maps.Keys(split.metrics["api"])))
				}
			}
			for hubName, names := range split.metrics {
				for m := range names {
					if !upMetrics[m] {
						t.Errorf("purser %s's registry holds %s, up's does not", hubName, m)
					}
				}
			}
		})
	}
}
