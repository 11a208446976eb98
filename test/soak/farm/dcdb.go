package farm

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"
)

// The database of a DC farm: PostgreSQL on every DC, made highly
// available by Patroni (4.0, Debian 13's package), whose DCS is an etcd
// cluster of one member per DC. Patroni keeps one synchronous standby
// (synchronous_mode), so a commit is acknowledged only once a second DC
// has it, and promotes that standby when the primary's DC is lost.
//
// Patroni's behaviour that the farm relies on, from its source
// (patroni/ha.py, Ha.process_sync_replication): the synchronous standby
// is recorded in the DCS before postgresql.conf names it, and removed
// from the DCS before postgresql.conf forgets it, so a primary cut off
// from the DCS keeps waiting for its synchronous standby (its commits
// hang) until it demotes itself (Ha._run_cycle: "demoting self because
// DCS is not accessible and I was a leader"), and only a node that was
// synchronous may be promoted.

// Ports inside each DC; every DC has its own network namespace, so they
// are the same in all.
const (
	etcdClientPort  = 2379
	etcdPeerPort    = 2380
	patroniPort     = 8008
	postgresPort    = 5432
	natsClientPort  = 4222
	natsClusterPort = 6222
	natsMonitorPort = 8222
	apiPort         = 8080
	kubePort        = 6443
)

// Patroni's timing: the leader key lives 20 s, the HA loop runs every 2 s
// and gives a DCS or PostgreSQL call 5 s. 20 s is the shortest TTL Patroni
// accepts since 3.2 (patroni/patroni#2869, Config._validate_and_adjust
// _timeouts: a lower one is raised to 20 with a warning), and it keeps
// loop_wait + 2*retry_timeout <= ttl, so that a primary that cannot renew
// its key demotes before the key runs out. A lost primary's standby is
// promoted about ttl + 2 s after the last renewal: the key's lease runs
// out, and the standby gives the lost node's REST API 2 s before it takes
// the key (Ha.fetch_nodes_statuses). The 10 s that SANDBOX-NOTES.md tried
// under Patroni 3.0.2 is no longer possible.
const (
	patroniTTL          = 20
	patroniLoopWait     = 2
	patroniRetryTimeout = 5
)

func (f *DCFarm) etcdArgs(dc *DC) []string {
	var members []string
	for _, d := range f.DCs {
		members = append(members, fmt.Sprintf("etcd-%s=http://%s:%d", d.Name, d.Addr, etcdPeerPort))
	}
	client := fmt.Sprintf("http://%s:%d", dc.Addr, etcdClientPort)
	peer := fmt.Sprintf("http://%s:%d", dc.Addr, etcdPeerPort)
	return []string{"--name", "etcd-" + dc.Name, "--data-dir", filepath.Join(f.dir, "etcd-"+dc.Name, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", strings.Join(members, ","), "--initial-cluster-token", "purser-dc-farm",
		"--initial-cluster-state", "new"}
}

// waitEtcd waits until every powered DC's etcd member reports itself
// healthy, which needs a quorum.
func (f *DCFarm) waitEtcd(ctx context.Context) error {
	return waitFor(ctx, 2*time.Minute, "etcd healthy in every powered DC", func(ctx context.Context) error {
		for _, dc := range f.powered() {
			var h struct {
				Health string `json:"health"`
			}
			if err := getJSON(ctx, dc.http, fmt.Sprintf("http://%s:%d/health", dc.Addr, etcdClientPort), &h); err != nil {
				return fmt.Errorf("%s: %w", dc.Etcd.Name, err)
			}
			if h.Health != "true" {
				return fmt.Errorf("%s: health %q", dc.Etcd.Name, h.Health)
			}
		}
		return nil
	}, f.etcdProcs()...)
}

// preparePostgres makes the folder of the Patroni nodes, owned by the
// postgres user: PostgreSQL refuses to run as root, and Patroni runs it as
// itself. The folder's name ends in the test's pid, so that a later run
// can tell a dead run's leftovers (sweepDeadRuns).
func (f *DCFarm) preparePostgres() error {
	bin, err := postgresBin()
	if err != nil {
		return err
	}
	f.pgBin = bin
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("postgres: Patroni and PostgreSQL run as the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	f.pgCred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	f.pgRoot, err = os.MkdirTemp("", pgRootPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return err
	}
	if err := os.Chown(f.pgRoot, uid, gid); err != nil {
		return err
	}
	// The post-bootstrap script creates purser's database once the first
	// primary runs; Patroni hands it a connection string.
	script := filepath.Join(f.pgRoot, "post-bootstrap.sh")
	body := "#!/bin/sh\nexec " + filepath.Join(bin, "psql") + " -v ON_ERROR_STOP=1 -c 'CREATE DATABASE purser' \"$1\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		return err
	}
	for _, dc := range f.DCs {
		dir := f.pgDir(dc)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return err
		}
		if f.cfg.SteppableClocks {
			if err := f.steppableClock(dc); err != nil {
				return err
			}
		}
		data, err := yaml.Marshal(f.patroniConfig(dc, script))
		if err != nil {
			return err
		}
		cfgPath := filepath.Join(dir, "patroni.yml")
		if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
			return err
		}
		if err := os.Chown(cfgPath, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// pgRootPrefix names the Patroni nodes' folders in the temporary folder.
const pgRootPrefix = "purser-dcfarm-pg-"

func (f *DCFarm) pgDir(dc *DC) string { return filepath.Join(f.pgRoot, "pg-"+dc.Name) }

// patroniConfig is one node's configuration (Patroni's YAML settings:
// docs/yaml_configuration.rst of Patroni 4.0).
func (f *DCFarm) patroniConfig(dc *DC, postBootstrap string) map[string]any {
	var hosts []string
	for _, d := range f.DCs {
		hosts = append(hosts, fmt.Sprintf("%s:%d", d.Addr, etcdClientPort))
	}
	dir := f.pgDir(dc)
	hba := []string{
		"local all all trust",
		"host all all " + WANSubnet.String() + " trust",
		"host replication all " + WANSubnet.String() + " trust",
	}
	return map[string]any{
		"scope": "purser",
		"name":  "pg-" + dc.Name,
		"log":   map[string]any{"level": "INFO"},
		"restapi": map[string]any{
			"listen":          fmt.Sprintf("%s:%d", dc.Addr, patroniPort),
			"connect_address": fmt.Sprintf("%s:%d", dc.Addr, patroniPort),
		},
		"etcd3": map[string]any{"hosts": hosts},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl": patroniTTL, "loop_wait": patroniLoopWait, "retry_timeout": patroniRetryTimeout,
				// One synchronous standby: an acknowledged commit is in
				// two DCs. Not strict: with every standby gone the
				// primary goes on alone rather than stop.
				"synchronous_mode":       true,
				"synchronous_node_count": 1,
				"postgresql": map[string]any{
					"use_pg_rewind": true,
					"parameters": map[string]any{
						// Ten processes per DC, up to 32 connections each.
						"max_connections":       600,
						"wal_level":             "replica",
						"hot_standby":           "on",
						"wal_log_hints":         "on",
						"max_wal_senders":       10,
						"max_replication_slots": 10,
						"wal_keep_size":         "256MB",
						// A primary that demotes stops at once, not once the
						// walsender to a standby behind a cut gives up (60 s
						// by default): a fast shutdown waits for its
						// walsenders. Patroni demotes a second time when the
						// first outlasts a loop, and may start PostgreSQL
						// twice (patroni/patroni#3649, #3372): a 30-minute DC
						// soak caught a node left serving beside the one
						// Patroni watched.
						"wal_sender_timeout": "5s",
					},
				},
			},
			"initdb":         []any{map[string]any{"encoding": "UTF8"}, "data-checksums"},
			"pg_hba":         hba,
			"post_bootstrap": postBootstrap,
		},
		"postgresql": map[string]any{
			"listen":          fmt.Sprintf("%s:%d", dc.Addr, postgresPort),
			"connect_address": fmt.Sprintf("%s:%d", dc.Addr, postgresPort),
			"data_dir":        filepath.Join(dir, "data"),
			"bin_dir":         cmp.Or(dc.pgBinDir, f.pgBin),
			"pgpass":          filepath.Join(dir, "pgpass"),
			"pg_hba":          hba,
			"authentication": map[string]any{
				"superuser":   map[string]any{"username": "purser", "password": "purser"},
				"replication": map[string]any{"username": "replicator", "password": "replicator"},
			},
			"parameters": map[string]any{"unix_socket_directories": dir},
			// A new standby copies the primary without waiting for a
			// spread checkpoint (minutes).
			"basebackup": []any{map[string]any{"checkpoint": "fast"}},
			// A node that comes back from a lost DC rejoins as a standby
			// of whoever leads now, rewinding or copying its data again.
			"remove_data_directory_on_rewind_failure":     true,
			"remove_data_directory_on_diverged_timelines": true,
		},
	}
}

func (f *DCFarm) patroniArgs(dc *DC) []string {
	return []string{filepath.Join(f.pgDir(dc), "patroni.yml")}
}

// PatroniMember is one node of Patroni's GET /cluster answer.
type PatroniMember struct {
	Name     string `json:"name"`
	Role     string `json:"role"`  // leader, sync_standby, replica
	State    string `json:"state"` // running, streaming, starting, ...
	Timeline int    `json:"timeline"`
	Lag      any    `json:"lag"`
}

// PatroniCluster asks a DC's Patroni for the cluster as it sees it.
func (f *DCFarm) PatroniCluster(ctx context.Context, dc *DC) ([]PatroniMember, error) {
	var c struct {
		Members []PatroniMember `json:"members"`
	}
	err := getJSON(ctx, dc.http, fmt.Sprintf("http://%s:%d/cluster", dc.Addr, patroniPort), &c)
	return c.Members, err
}

// Primary is the DC whose PostgreSQL leads, as the powered DCs' Patroni
// see it; nil when there is none or they disagree.
func (f *DCFarm) Primary(ctx context.Context) (*DC, error) {
	var leader string
	for _, dc := range f.powered() {
		if f.WAN.Isolated(dc.Index) {
			continue
		}
		members, err := f.PatroniCluster(ctx, dc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dc.Patroni.Name, err)
		}
		l := ""
		for _, m := range members {
			if m.Role == "leader" && m.State == "running" {
				l = m.Name
			}
		}
		if l == "" || (leader != "" && l != leader) {
			return nil, fmt.Errorf("%s sees leader %q, another DC %q", dc.Patroni.Name, l, leader)
		}
		leader = l
	}
	for _, dc := range f.DCs {
		if "pg-"+dc.Name == leader {
			return dc, nil
		}
	}
	return nil, fmt.Errorf("no PostgreSQL leader")
}

// SyncStandby is the DC of the primary's synchronous standby, as the
// primary's DC's Patroni sees it; nil when there is none.
func (f *DCFarm) SyncStandby(ctx context.Context) (*DC, error) {
	primary, err := f.Primary(ctx)
	if err != nil {
		return nil, err
	}
	members, err := f.PatroniCluster(ctx, primary)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		for _, dc := range f.DCs {
			if m.Role == "sync_standby" && m.Name == "pg-"+dc.Name {
				return dc, nil
			}
		}
	}
	return nil, nil
}

// waitPostgres waits until Patroni reports a running leader and a
// streaming synchronous standby, and every other powered, connected node
// streaming: the database takes writes that survive the loss of a DC.
func (f *DCFarm) waitPostgres(ctx context.Context, timeout time.Duration) error {
	return waitFor(ctx, timeout, "PostgreSQL with a leader and a synchronous standby under Patroni", func(ctx context.Context) error {
		var live *DC
		for _, dc := range f.powered() {
			if !f.WAN.Isolated(dc.Index) {
				live = dc
				break
			}
		}
		if live == nil {
			return fmt.Errorf("no DC is powered and connected")
		}
		members, err := f.PatroniCluster(ctx, live)
		if err != nil {
			return err
		}
		roles := map[string]string{}
		for _, m := range members {
			roles[m.Name] = m.Role + "/" + m.State
		}
		leaders, syncs := 0, 0
		for _, m := range members {
			switch {
			case m.Role == "leader" && m.State == "running":
				leaders++
			case m.Role == "sync_standby" && (m.State == "streaming" || m.State == "running"):
				syncs++
			}
		}
		if leaders != 1 || syncs < 1 {
			return fmt.Errorf("members %v", roles)
		}
		for _, dc := range f.powered() {
			if f.WAN.Isolated(dc.Index) {
				continue
			}
			r := roles["pg-"+dc.Name]
			if r != "leader/running" && !strings.HasSuffix(r, "/streaming") && !strings.HasSuffix(r, "/running") {
				return fmt.Errorf("member pg-%s is %q; members %v", dc.Name, r, roles)
			}
		}
		return nil
	}, f.patroniProcs()...)
}

// DSN is the database as the components of dc reach it: every DC's node,
// dc's own first, of which the client takes the one that accepts writes
// (target_session_attrs=read-write) and finds the next primary by itself
// after a failover. connect_timeout is per host: a node behind a cut costs
// two seconds, not the client's whole deadline.
func (f *DCFarm) DSN(dc *DC) string {
	hosts := []string{fmt.Sprintf("%s:%d", dc.Addr, postgresPort)}
	for _, d := range f.DCs {
		if d != dc {
			hosts = append(hosts, fmt.Sprintf("%s:%d", d.Addr, postgresPort))
		}
	}
	return "postgres://purser@" + strings.Join(hosts, ",") +
		"/purser?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
}

// EtcdLeader is the DC whose etcd member leads the DCS, as the powered,
// connected DCs' members report it (etcd's maintenance status, through
// its JSON gateway): a lost DC that held it costs an election, and etcd
// gives every lease its whole TTL again under a new leader, so the lost
// primary's leader key then outlives it by a full ttl from the election.
func (f *DCFarm) EtcdLeader(ctx context.Context) (*DC, error) {
	ids := map[string]*DC{}
	leader := ""
	for _, dc := range f.powered() {
		if f.WAN.Isolated(dc.Index) {
			continue
		}
		var st struct {
			Header struct {
				MemberID string `json:"member_id"`
			} `json:"header"`
			Leader string `json:"leader"`
		}
		if err := postJSON(ctx, dc.http, fmt.Sprintf("http://%s:%d/v3/maintenance/status", dc.Addr, etcdClientPort), struct{}{}, &st); err != nil {
			return nil, fmt.Errorf("%s: %w", dc.Etcd.Name, err)
		}
		ids[st.Header.MemberID] = dc
		if st.Leader != "" {
			leader = st.Leader
		}
	}
	if dc, ok := ids[leader]; ok {
		return dc, nil
	}
	return nil, fmt.Errorf("etcd leader %q is no powered, connected DC's member", leader)
}
