package doccheck

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
)

// Field is one block, label or attribute an HCL file may hold, as the parser's own structs declare
// it with gohcl's `hcl:"name,kind"` tags.
type Field struct {
	Path     string // dotted from the file's top: "oci_mirror.identity.issuer"
	Kind     string // "block", "label" or "attribute"
	Type     string // the HCL type an attribute takes ("string", "list(string)", "number", "bool"); "" for any expression
	Required bool
}

// hclSchema lists every field of the HCL file decoded into a value of type t (a struct), walking
// nested blocks. It reads the same tags gohcl decodes with, so it cannot disagree with the parser.
func hclSchema(t reflect.Type) []Field {
	var out []Field
	walkSchema(t, "", &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func walkSchema(t reflect.Type, prefix string, out *[]Field) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("hcl")
		if !ok {
			continue
		}
		name, kind, _ := strings.Cut(tag, ",")
		if name == "" { // def_range, remain, body: not something a file writes
			continue
		}
		path := prefix + name
		switch kind {
		case "block":
			inner := f.Type
			for inner.Kind() == reflect.Pointer || inner.Kind() == reflect.Slice {
				inner = inner.Elem()
			}
			*out = append(*out, Field{Path: path, Kind: "block", Required: f.Type.Kind() == reflect.Struct})
			walkSchema(inner, path+".", out)
		case "label":
			*out = append(*out, Field{Path: path, Kind: "label", Type: "string", Required: true})
		default:
			*out = append(*out, Field{Path: path, Kind: "attribute", Type: hclType(f.Type), Required: kind != "optional"})
		}
	}
}

// hclType names the HCL type a Go field decodes: "" for an expression or attribute kept as such
// (the parser evaluates it itself, so the page says what it takes).
func hclType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64, reflect.Float64:
		return "number"
	case reflect.Slice:
		if e := hclType(t.Elem()); e != "" {
			return "list(" + e + ")"
		}
	}
	return ""
}

// Reference is what a reference page documents: its rows by dotted path. A row is a line of a
// table whose header is "Name | Type | Default | Meaning"; its path is the first code span of the
// heading above the table (a dotted block path; a heading without one is the file's top level)
// joined with the first code span of the row's Name cell.
type Reference map[string]RefRow

// RefRow is one documented field.
type RefRow struct {
	Type, Default, Meaning string
	Line                   int
}

// parseReference reads a reference page's tables.
func parseReference(text string) (Reference, error) {
	ref := Reference{}
	block, inTable := "", false
	for i, line := range strings.Split(text, "\n") {
		if h := headingRE.FindStringSubmatch(line); h != nil {
			block, inTable = firstCode(h[2]), false
			continue
		}
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(t, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if len(cells) == 4 && cells[0] == "Name" && cells[1] == "Type" && cells[2] == "Default" && cells[3] == "Meaning" {
			inTable = true
			continue
		}
		if !inTable || strings.Trim(t, "|-: ") == "" {
			continue
		}
		if len(cells) != 4 {
			return nil, fmt.Errorf("line %d: a reference row needs 4 cells, has %d", i+1, len(cells))
		}
		name := firstCode(cells[0])
		if name == "" {
			return nil, fmt.Errorf("line %d: the Name cell has no `name`", i+1)
		}
		path := name
		if block != "" {
			path = block + "." + name
		}
		if _, dup := ref[path]; dup {
			return nil, fmt.Errorf("line %d: %s is documented twice", i+1, path)
		}
		ref[path] = RefRow{Type: cells[1], Default: cells[2], Meaning: cells[3], Line: i + 1}
	}
	return ref, nil
}

func firstCode(s string) string {
	m := codeRE.FindString(s)
	return strings.Trim(m, "`")
}

// checkReference compares a page with the parser's schema: every field documented with its kind
// or type and whether it is required, and no row for a field the parser does not read. Each
// problem is one line naming the field and the fix.
func checkReference(schema []Field, ref Reference) []string {
	var problems []string
	known := map[string]bool{}
	for _, f := range schema {
		known[f.Path] = true
		row, ok := ref[f.Path]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s (%s) is read by the parser but not documented: add a row `%s` under the heading of `%s`",
				f.Path, f.Kind, last(f.Path), parent(f.Path)))
			continue
		}
		want := f.Type
		if f.Kind != "attribute" {
			want = f.Kind
		}
		if want != "" && !strings.HasPrefix(row.Type, want) {
			problems = append(problems, fmt.Sprintf("line %d: %s: the Type cell says %q; the parser takes %s", row.Line, f.Path, row.Type, want))
		}
		if row.Type == "" {
			problems = append(problems, fmt.Sprintf("line %d: %s: the Type cell is empty", row.Line, f.Path))
		}
		if req := row.Default == "required"; req != f.Required {
			problems = append(problems, fmt.Sprintf("line %d: %s: the Default cell says %q, but the parser has it required=%v", row.Line, f.Path, row.Default, f.Required))
		}
		if row.Meaning == "" {
			problems = append(problems, fmt.Sprintf("line %d: %s: the Meaning cell is empty", row.Line, f.Path))
		}
	}
	for p, row := range ref {
		if !known[p] {
			problems = append(problems, fmt.Sprintf("line %d: %s is documented but the parser reads no such field: remove the row or fix its name or heading", row.Line, p))
		}
	}
	sort.Strings(problems)
	return problems
}

func last(p string) string { return p[strings.LastIndex(p, ".")+1:] }

func parent(p string) string {
	if i := strings.LastIndex(p, "."); i >= 0 {
		return p[:i]
	}
	return "the top level"
}

// CheckReferencePage reads the reference page at path and checks it against the schema of the
// parser's struct type t (hclSchema): every field a row, every row a field. It returns what
// disagrees, one line each.
func CheckReferencePage(path string, t reflect.Type) ([]string, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ref, err := parseReference(string(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return checkReference(hclSchema(t), ref), nil
}
