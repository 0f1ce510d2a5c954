package middleware

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// Record is one audit line: one provider call.
type Record struct {
	Time        string       `json:"time"`
	Provider    string       `json:"provider"`
	Version     string       `json:"version,omitempty"`
	RPC         string       `json:"rpc"`
	Caller      string       `json:"caller,omitempty"` // "oprov" when oprov made the call itself, not tofu
	Kind        string       `json:"kind,omitempty"`   // resource, data_source, function, ...
	Name        string       `json:"name,omitempty"`   // the resource type, data source or function
	Action      string       `json:"action,omitempty"`
	DurationMS  float64      `json:"duration_ms"`
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
	Policy      []Decision   `json:"policy,omitempty"`
	Error       string       `json:"error,omitempty"`
	// Prior and Planned are written only when the audit asks for values; sensitive attributes
	// are always redacted.
	Prior   any `json:"prior,omitempty"`
	Planned any `json:"planned,omitempty"`
	// Sandbox and Pid are written in the record of a launch (RPC "Launch", Caller "oprov"): the
	// sandbox the provider runs under ("no sandbox" without one), and its process.
	Sandbox string `json:"sandbox,omitempty"`
	Pid     int    `json:"pid,omitempty"`
	// Remote, in the record of a launch, names the remote block whose far side runs the
	// provider (Pid is then the command that reaches it); empty when it runs here.
	Remote string `json:"remote,omitempty"`
}

// Decision is a rule that matched a call.
type Decision struct {
	Rule    string `json:"rule"`
	Effect  string `json:"effect"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"` // the rule could not be evaluated: why
}

// Audit appends records as JSON lines to a file, or to a stream ("-" means stderr). Several
// processes may share one file on a local filesystem: it is opened for appending, and each record
// is one write, which the kernel places whole at the end of the file, never inside or across
// another process's record (POSIX O_APPEND; a regular file is written under its inode's lock).
// NFS does not promise this for appends from several hosts.
type Audit struct {
	Values bool // record prior and planned values (sensitive attributes redacted)
	// Continue lets calls go on when a record cannot be written (on_error = "continue"); by
	// default the call fails, and so does every later one (see Put).
	Continue bool
	// Warn hears, once, that records are being lost when Continue is set.
	Warn func(string)

	mu     sync.Mutex
	w      io.Writer
	f      *os.File
	broken error // the first failed write
	warned bool
}

// OpenAudit opens path for appending ("-" for the given stderr).
func OpenAudit(path string, values bool, stderr io.Writer) (*Audit, error) {
	if path == "-" {
		return &Audit{Values: values, w: stderr}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit file: %w", err)
	}
	return &Audit{Values: values, w: f, f: f}, nil
}

// Write appends one record, in one write. Values JSON cannot hold are already written as marked
// strings (see unencodable); should encoding fail all the same, the values are replaced by a
// marked string saying why, so the record itself is never lost.
func (a *Audit) Write(r *Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		c := *r
		for _, v := range []*any{&c.Prior, &c.Planned} {
			if *v != nil {
				if _, verr := json.Marshal(*v); verr != nil {
					*v = unencodable + verr.Error()
				}
			}
		}
		if data, err = json.Marshal(&c); err != nil {
			return err
		}
	}
	data = append(data, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	_, err = a.w.Write(data)
	return err
}

// Put writes a record under the audit's error policy. When the write fails: with Continue, the
// call goes on and Warn hears of it (once); otherwise Put returns an error for the call to fail
// with, and the audit is broken: Broken refuses every later call.
func (a *Audit) Put(r *Record) error {
	err := a.Write(r)
	if err == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Continue {
		if !a.warned && a.Warn != nil {
			a.warned = true
			a.Warn(fmt.Sprintf("audit: %v; on_error = \"continue\": calls go on, and records are lost", err))
		}
		return nil
	}
	if a.broken == nil {
		a.broken = err
	}
	return fmt.Errorf("oprov: the audit trail cannot be written (%v), so the call fails; set on_error = \"continue\" in the audit block to go on without it", err)
}

// Broken gives, once a write has failed and the audit does not continue, the error every call
// now fails with, before it reaches the provider.
func (a *Audit) Broken() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.broken == nil {
		return nil
	}
	return fmt.Errorf("oprov: the audit trail cannot be written (%v), so no call goes through; set on_error = \"continue\" in the audit block to go on without it", a.broken)
}

// Close closes the audit file.
func (a *Audit) Close() error {
	if a.f == nil {
		return nil
	}
	return a.f.Close()
}
