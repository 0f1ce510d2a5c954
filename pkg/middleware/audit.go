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
}

// Decision is a rule that matched a call.
type Decision struct {
	Rule    string `json:"rule"`
	Effect  string `json:"effect"`
	Message string `json:"message,omitempty"`
}

// Audit appends records as JSON lines to a file, or to a stream ("-" means stderr). Several
// processes may share one file on a local filesystem: it is opened for appending, and each record
// is one write, which the kernel places whole at the end of the file, never inside or across
// another process's record (POSIX O_APPEND; a regular file is written under its inode's lock).
// NFS does not promise this for appends from several hosts.
type Audit struct {
	Values bool // record prior and planned values (sensitive attributes redacted)
	mu     sync.Mutex
	w      io.Writer
	f      *os.File
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

// Write appends one record, in one write.
func (a *Audit) Write(r *Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	_, err = a.w.Write(data)
	return err
}

// Close closes the audit file.
func (a *Audit) Close() error {
	if a.f == nil {
		return nil
	}
	return a.f.Close()
}
