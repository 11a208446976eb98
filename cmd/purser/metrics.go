package main

// metricsHelp is the help of every component's --metrics-listen flag.
const metricsHelp = "host:port to serve /metrics (Prometheus) and /healthz on; empty serves nothing"
