// Command acpflow-temporal-devserver is a single-process Temporal server on
// SQLite, for acpflow's opt-in real-server test and benchmark. The Temporal
// CLI's dev server cannot be built from the module proxy, and the SDK's
// StartDevServer downloads it; this builds one from go.temporal.io/server.
// It lives in its own module, because the server's build is heavy (minutes
// and gigabytes) and nothing else needs it.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	tlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

func main() {
	ip := flag.String("ip", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 7233, "frontend gRPC port")
	db := flag.String("db", "", "SQLite file (empty: in memory, gone when the server stops)")
	namespace := flag.String("namespace", "default", "namespace to create")
	flag.Parse()
	if err := run(*ip, *port, *db, *namespace); err != nil {
		log.Fatalf("acpflow-temporal-devserver: %v", err)
	}
}

func run(ip string, port int, db, namespace string) error {
	sql, err := prepareStore(db, namespace)
	if err != nil {
		return err
	}
	ports := map[string]int{"frontend": port}
	for _, svc := range []string{"history", "matching", "worker", "http"} {
		p, err := freePort(ip)
		if err != nil {
			return err
		}
		ports[svc] = p
	}
	conf, hosts := serverConfig(ip, ports, sql)
	frontend := conf.PublicClient.HostPort

	dyn := dynamicconfig.StaticClient{
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8096,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
	}
	logger := tlog.NewZapLogger(tlog.BuildZapLogger(tlog.Config{Level: "error", Format: "console"}))
	srv, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "acpflow-temporal-devserver: listening on %s, namespace %s\n", frontend, namespace)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return srv.Stop()
}

// prepareStore describes the SQLite store (in memory unless db names a file),
// creates its schema when the file is new, and creates the namespace, so the
// server finds everything it needs when it starts.
func prepareStore(db, namespace string) (*config.SQL, error) {
	sql := &config.SQL{PluginName: sqliteplugin.PluginName, ConnectAttributes: map[string]string{"mode": "memory", "cache": "shared"}}
	sql.DatabaseName = "acpflow" + strconv.Itoa(os.Getpid())
	if db != "" {
		sql.ConnectAttributes = map[string]string{"mode": "rwc", "_journal_mode": "wal"}
		sql.DatabaseName = db
		if _, err := os.Stat(db); os.IsNotExist(err) {
			if err := sqliteschema.SetupSchema(sql); err != nil {
				return nil, fmt.Errorf("schema: %w", err)
			}
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig("active", namespace, false, nil)
	if err != nil {
		return nil, err
	}
	if err := sqliteschema.CreateNamespaces(sql, ns); err != nil {
		return nil, fmt.Errorf("namespace: %w", err)
	}
	return sql, nil
}

// serverConfig is a single-cluster, single-shard configuration: every service
// on ip at its port from ports (frontend on the one the user asked for),
// persistence and visibility in sql, archival off.
func serverConfig(ip string, ports map[string]int, sql *config.SQL) (*config.Config, map[primitives.ServiceName]static.Hosts) {
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = ip
	conf.Persistence.DefaultStore = "sqlite"
	conf.Persistence.VisibilityStore = "sqlite"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: sql}}
	frontend := net.JoinHostPort(ip, strconv.Itoa(ports["frontend"]))
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10, MasterClusterName: "active", CurrentClusterName: "active",
		ClusterInformation: map[string]cluster.ClusterInformation{"active": {
			Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend,
			HTTPAddress: net.JoinHostPort(ip, strconv.Itoa(ports["http"])), ClusterID: "acpflow-dev",
		}},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	hosts := map[primitives.ServiceName]static.Hosts{}
	for _, svc := range []string{"frontend", "history", "matching", "worker"} {
		var s config.Service
		s.RPC.GRPCPort, s.RPC.BindOnIP = ports[svc], ip
		if svc == "frontend" {
			s.RPC.HTTPPort = ports["http"]
		}
		conf.Services[svc] = s
		hosts[primitives.ServiceName(svc)] = static.SingleLocalHost(net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[svc])))
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontend
	return &conf, hosts
}

func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
