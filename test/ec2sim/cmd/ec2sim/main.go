// Command ec2sim serves an emulated EC2 Query API, IMDSv2 and an admin API
// from a scenario file, for enipam's tests, benchmarks and demo.
//
//	ec2sim --scenario demo --listen 127.0.0.1:0 --ready-file /tmp/ec2sim.json
//
// Once listening it prints one JSON line with its URLs to stdout (and writes
// the same to --ready-file), so a parent that asked for port 0 learns them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/enipam/enipam/test/ec2sim"
)

// options are the command's flags.
type options struct {
	scenario  string
	listen    string
	readyFile string
	tlsListen string
	tlsCert   string
	seed      int64
	logLevel  string
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.scenario, "scenario", "demo", `scenario YAML file, or "demo" for the built-in one`)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "address of the EC2 and admin API (port 0 picks a free port)")
	fs.StringVar(&o.readyFile, "ready-file", "", "file to write the ready JSON line to, atomically, once listening")
	fs.StringVar(&o.tlsListen, "tls-listen", "", "also serve HTTPS on this address with a self-signed certificate")
	fs.StringVar(&o.tlsCert, "tls-cert-file", "", "where to write the self-signed certificate (PEM); required with --tls-listen")
	fs.Int64Var(&o.seed, "seed", -1, "override the scenario's seed (IDs, MACs, delays)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
}

func (o *options) validate() error {
	if o.tlsListen != "" && o.tlsCert == "" {
		return errors.New("--tls-listen needs --tls-cert-file")
	}
	var l slog.Level
	return l.UnmarshalText([]byte(o.logLevel))
}

func main() {
	var o options
	fs := flag.NewFlagSet("ec2sim", flag.ExitOnError)
	o.addFlags(fs)
	_ = fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ec2sim:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, printing the ready line to stdout and logging
// to logs.
func run(ctx context.Context, o options, stdout, logs io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.logLevel))
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level}))

	sc, err := ec2sim.LoadScenario(o.scenario)
	if err != nil {
		return err
	}
	if o.seed >= 0 {
		sc.Seed = uint64(o.seed)
	}
	sim, err := ec2sim.New(sc, ec2sim.WithLogger(log))
	if err != nil {
		return err
	}
	ep, err := sim.Start(ctx, o.listen)
	if err != nil {
		return err
	}
	if o.tlsListen != "" {
		tep, err := sim.StartTLS(ctx, o.tlsListen, o.tlsCert)
		if err != nil {
			return err
		}
		ep.EC2TLS, ep.CertFile = tep.EC2TLS, tep.CertFile
	}
	line, err := json.Marshal(ep)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(line))
	if o.readyFile != "" {
		if err := writeAtomic(o.readyFile, append(line, '\n')); err != nil {
			return err
		}
	}
	log.Info("ec2sim ready", "ec2", ep.EC2, "admin", ep.Admin, "scenario", o.scenario, "region", sim.State().Region())
	<-ctx.Done()
	log.Info("ec2sim stopping")
	return sim.Close()
}

// writeAtomic writes b to path through a temporary file and a rename, so a
// reader polling for path never sees it half written.
func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ec2sim-ready-*")
	if err != nil {
		return fmt.Errorf("writing ready file, %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("writing ready file, %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing ready file, %w", err)
	}
	return os.Rename(tmp.Name(), path)
}
