package middleware

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAuditSharedFile: several processes appending to one audit file at once leave every record
// whole, on its own line, and none lost.
func TestAuditSharedFile(t *testing.T) {
	const procs, records = 4, 400
	if path := os.Getenv("OPROV_TEST_AUDIT_FILE"); path != "" {
		writeAuditRecords(t, path, os.Getenv("OPROV_TEST_AUDIT_WRITER"), records)
		return
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var cmds []*exec.Cmd
	for i := 0; i < procs; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAuditSharedFile$")
		cmd.Env = append(os.Environ(), "OPROV_TEST_AUDIT_FILE="+path, "OPROV_TEST_AUDIT_WRITER="+strconv.Itoa(i))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("a record was torn: %v: %.120s", err, sc.Text())
		}
		seen[r.Provider]++
	}
	for i := 0; i < procs; i++ {
		if n := seen["writer-"+strconv.Itoa(i)]; n != records {
			t.Errorf("writer %d: %d records in the file, want %d", i, n, records)
		}
	}
}

// writeAuditRecords appends n records large enough that a torn write would show.
func writeAuditRecords(t *testing.T, path, writer string, n int) {
	a, err := OpenAudit(path, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	big := strings.Repeat(writer, 3000)
	for i := 0; i < n; i++ {
		if err := a.Write(&Record{Provider: "writer-" + writer, RPC: "PlanResourceChange", Planned: big}); err != nil {
			t.Fatal(err)
		}
	}
}
