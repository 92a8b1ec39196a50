package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/enipam/enipam/nodeagent/routing"
)

// DefaultStateDir is where the agent keeps, on the node, what it must
// remember to undo its changes: a tmpfs, cleared on reboot exactly when
// the sysctls it describes return to the distribution's defaults.
const DefaultStateDir = "/run/enipam"

// WithStateDir makes the Kernel record, under dir, the rp_filter value of
// each link before its first change, so RestoreRPFilter can put it back.
// Without it nothing is recorded and nothing restored.
func WithStateDir(dir string) Option {
	return func(k *Kernel) { k.stateDir = dir }
}

var _ routing.RPFilterRestorer = (*Kernel)(nil)

// rpFilterRecord is what the state directory holds for one link: its
// index (a link of the same name created later is another link), the
// value it had before enipam first changed it, and the value enipam last
// wrote.
type rpFilterRecord struct {
	index    int
	was, set int
}

func (r rpFilterRecord) String() string { return fmt.Sprintf("%d %d %d\n", r.index, r.was, r.set) }

func parseRPFilterRecord(b []byte) (rpFilterRecord, error) {
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return rpFilterRecord{}, fmt.Errorf("want 3 fields, got %q", b)
	}
	var v [3]int
	for i, s := range f {
		n, err := strconv.Atoi(s)
		if err != nil {
			return rpFilterRecord{}, err
		}
		v[i] = n
	}
	return rpFilterRecord{index: v[0], was: v[1], set: v[2]}, nil
}

func (k *Kernel) rpFilterRecordDir() string { return filepath.Join(k.stateDir, "rp_filter") }

// recordRPFilter notes, before value is written to the link, the value
// the link has now, unless a record of this very link already holds the
// value from before enipam. It fails when the record cannot be written:
// a change that could not be undone later is not made.
func (k *Kernel) recordRPFilter(l routing.Link, value int) error {
	if k.stateDir == "" {
		return nil
	}
	dir := k.rpFilterRecordDir()
	path := filepath.Join(dir, l.Name)
	rec, err := k.readRPFilterRecord(path)
	if err != nil || rec.index != l.Index {
		cur, err := k.RPFilter([]string{l.Name})
		if err != nil {
			return err
		}
		was, ok := cur[l.Name]
		if !ok {
			return fmt.Errorf("reading rp_filter of %s before changing it: %w", l.Name, routing.ErrNotFound)
		}
		rec = rpFilterRecord{index: l.Index, was: was}
	}
	rec.set = value
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("recording the rp_filter of %s, %w", l.Name, err)
	}
	if err := os.WriteFile(path, []byte(rec.String()), 0o600); err != nil {
		return fmt.Errorf("recording the rp_filter of %s, %w", l.Name, err)
	}
	return nil
}

func (k *Kernel) readRPFilterRecord(path string) (rpFilterRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return rpFilterRecord{}, err
	}
	return parseRPFilterRecord(b)
}

// RestoreRPFilter implements routing.RPFilterRestorer from the records of
// the state directory: a link with the recorded name and index whose
// rp_filter still is what enipam wrote gets its earlier value back. Every
// record is removed once handled; a record that cannot be read, or whose
// link is gone or changed since, is dropped. A failed write keeps its
// record for the next attempt.
func (k *Kernel) RestoreRPFilter() ([]routing.RPFilterRestore, error) {
	if k.stateDir == "" {
		return nil, nil
	}
	dir := k.rpFilterRecordDir()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s, %w", dir, err)
	}
	links, err := k.Links()
	if err != nil {
		return nil, err
	}
	var out []routing.RPFilterRestore
	var errs []error
	for _, e := range entries {
		name, path := e.Name(), filepath.Join(dir, e.Name())
		rec, err := k.readRPFilterRecord(path)
		i := slices.IndexFunc(links, func(l routing.Link) bool { return l.Name == name })
		if err == nil && checkLinkName(name) == nil && i >= 0 && links[i].Index == rec.index {
			cur, err := k.RPFilter([]string{name})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if v, ok := cur[name]; ok && v == rec.set && v != rec.was {
				if err := k.writeRPFilter(name, rec.was); err != nil {
					errs = append(errs, fmt.Errorf("restoring the rp_filter of %s, %w", name, err))
					continue
				}
				out = append(out, routing.RPFilterRestore{Link: name, From: rec.set, To: rec.was})
			}
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}
