package stdiohost

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// program writes an sh provider into a directory and starts it.
func program(t *testing.T, script string) *process {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPROV_STDIO_TIMEOUT", "1s")
	p, err := startProcess(dir, dir, &Manifest{Type: "t", Command: []string{"sh", "p.sh"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close(time.Second) })
	return p
}

func TestCallAnswersAndErrors(t *testing.T) {
	p := program(t, `read l; echo '{"jsonrpc":"2.0","method":"log"}'; echo '{"jsonrpc":"2.0","id":1,"result":{"x":12345678901234567890.5}}'
read l; echo '{"jsonrpc":"2.0","id":2,"error":{"code":7,"message":"no such key","data":{"path":["key",0],"detail":"d"}}}'
sleep 5`)
	var out struct{ X any }
	if err := p.call(context.Background(), "a", nil, &out); err != nil {
		t.Fatal(err)
	}
	err := p.call(context.Background(), "b", nil, nil)
	ce, ok := err.(*callError)
	if !ok || ce.Message != "no such key" || ce.Detail != "d" || len(ce.Path) != 2 || ce.Method != "b" {
		t.Fatalf("error %#v", err)
	}
}

func TestFaultsEndCalls(t *testing.T) {
	for name, tc := range map[string]struct{ script, want string }{
		"garbage": {`read l; echo 'hello world'; sleep 5`, `not a JSON-RPC 2.0 message on stdout: "hello world"`},
		"exit":    {`read l; echo 'it broke' >&2; exit 3`, "exit status 3; its last lines on stderr:\n  it broke"},
		"silent":  {`read l; sleep 30`, "did not answer m within 1s; stopped it"},
	} {
		t.Run(name, func(t *testing.T) {
			p := program(t, tc.script)
			start := time.Now()
			err := p.call(context.Background(), "m", nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), `stdio provider "t" (sh p.sh)`) {
				t.Errorf("error %v does not name the provider", err)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the call took %s", took)
			}
			if err := p.call(context.Background(), "again", nil, nil); err == nil || !strings.Contains(err.Error(), "cannot send again") {
				t.Errorf("a call after the fault: %v", err)
			}
		})
	}
}

// Several calls in flight when the program says it is concurrent: answers in any order reach
// the call they answer.
func TestConcurrentAnswersOutOfOrder(t *testing.T) {
	p := program(t, `read a; read b
echo '{"jsonrpc":"2.0","id":2,"result":{"who":"second"}}'
sleep 0.3
echo '{"jsonrpc":"2.0","id":1,"result":{"who":"first"}}'
sleep 5`)
	p.concurrent = true
	type answer struct{ call, who string }
	got := make(chan answer, 2)
	for _, call := range []string{"first", "second"} {
		go func() {
			var out struct{ Who string }
			if err := p.call(context.Background(), "m", nil, &out); err != nil {
				out.Who = err.Error()
			}
			got <- answer{call, out.Who}
		}()
		time.Sleep(100 * time.Millisecond) // ids in order: 1, then 2
	}
	a, b := <-got, <-got
	if a != (answer{"second", "second"}) || b != (answer{"first", "first"}) {
		t.Errorf("answers %+v then %+v; want the second call answered first, each with its own answer", a, b)
	}
}

func FuzzDeliver(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":{"path":["a",1]}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"note"}`))
	// What the protocol refuses (wire.go): a huge number, one past every bound, bytes that are
	// not UTF-8, a lone surrogate.
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"n":` + strings.Repeat("9", 5000) + `}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"n":1e999999999}}`))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"s\":\"caf\xe9\"}}"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"s":"\ud800"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		p := &process{name: "x", pending: map[int64]chan reply{1: make(chan reply, 1)}}
		_ = p.deliver(line)
	})
}
