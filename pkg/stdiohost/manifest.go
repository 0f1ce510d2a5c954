package stdiohost

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"
)

// ManifestName is the file that makes a directory a stdio provider.
const ManifestName = "oprov-provider.json"

// Manifest is oprov-provider.json (docs/stdio-protocol.md).
type Manifest struct {
	Type           string   `json:"type"`
	Command        []string `json:"command"`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty"`
}

var typeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`) })

// ReadManifest reads and checks DIR/oprov-provider.json.
func ReadManifest(dir string) (*Manifest, error) {
	p := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading the stdio provider manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %v (want {\"type\": \"NAME\", \"command\": [\"python3\", \"provider.py\"]})", p, err)
	}
	if !typeName().MatchString(m.Type) {
		return nil, fmt.Errorf("%s: \"type\" %q is not a provider type (lower case letters, digits and -)", p, m.Type)
	}
	if len(m.Command) == 0 || m.Command[0] == "" {
		return nil, fmt.Errorf("%s: \"command\" is empty; give the program and its arguments, e.g. [\"python3\", \"provider.py\"]", p)
	}
	if m.TimeoutSeconds < 0 {
		return nil, fmt.Errorf("%s: \"timeout_seconds\" is negative", p)
	}
	return &m, nil
}

// defaultTimeout bounds one request when neither the manifest nor OPROV_STDIO_TIMEOUT says.
const defaultTimeout = 5 * time.Minute

// timeout is how long one request may take: OPROV_STDIO_TIMEOUT, else the manifest's, else
// defaultTimeout.
func (m *Manifest) timeout() (time.Duration, error) {
	if s := os.Getenv("OPROV_STDIO_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("OPROV_STDIO_TIMEOUT=%q is not a positive duration such as 30s", s)
		}
		return d, nil
	}
	if m.TimeoutSeconds > 0 {
		return time.Duration(m.TimeoutSeconds * float64(time.Second)), nil
	}
	return defaultTimeout, nil
}
