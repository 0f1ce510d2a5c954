package tofufiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	hcl1 "github.com/hashicorp/hcl"
	"github.com/hashicorp/hcl/hcl/ast"
	hcl1parser "github.com/hashicorp/hcl/hcl/parser"
	"github.com/hashicorp/hcl/hcl/token"
)

// ParseCLIConfig reads a CLI configuration file as OpenTofu does: HCL 1, in its native syntax
// (quoted keys included) or JSON (a .tfrc.json, or any file that starts with "{"). name is the
// file's path, for messages and for the items' From.
func ParseCLIConfig(name string, src []byte) (cfg *CLIConfig, err error) {
	defer func() {
		// HCL 1 panics on some literals its scanner let through; OpenTofu would fail on them too.
		if r := recover(); r != nil {
			cfg, err = nil, fmt.Errorf("%s: %v", name, r)
		}
	}()
	if t := bytes.TrimSpace(src); len(t) > 0 && t[0] == '{' && !json.Valid(t) {
		// HCL 1 reads this as JSON and would drop what follows a syntax error without a word.
		return nil, fmt.Errorf("%s: not valid JSON (a file that starts with { is read as JSON)", name)
	}
	f, err := hcl1.ParseBytes(src)
	var pe *hcl1parser.PosError
	if errors.As(err, &pe) {
		return nil, fmt.Errorf("%s:%d:%d: %w", name, pe.Pos.Line, pe.Pos.Column, pe.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	root, ok := f.Node.(*ast.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%s: not a CLI configuration (no settings at the top)", name)
	}
	cfg = &CLIConfig{}
	for _, it := range root.Items {
		item, err := convertItem(it)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, it.Pos().Line, err)
		}
		item.From, item.Line = name, it.Pos().Line
		if item.Keys[0] != "provider_installation" {
			cfg.Settings = append(cfg.Settings, item)
			continue
		}
		if err := cfg.addInstallation(name, item); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, it.Pos().Line, err)
		}
	}
	return cfg, nil
}

// addInstallation takes a provider_installation item: a block of methods, or (from JSON, which
// HCL 1 flattens) one method under the provider_installation key.
func (c *CLIConfig) addInstallation(name string, item Item) error {
	if item.Value.Kind != kindObject {
		return fmt.Errorf("provider_installation must be a block")
	}
	methods := item.Value.Object
	if len(item.Keys) > 1 {
		methods = []Item{{Keys: item.Keys[1:], Value: item.Value}}
	}
	if c.Installation == nil {
		c.Installation = &Installation{From: name, Line: item.Line}
	} else if len(item.Keys) == 1 || c.Installation.From != name {
		return fmt.Errorf("a second provider_installation block: OpenTofu allows only one")
	}
	for _, mi := range methods {
		m, err := methodOf(mi)
		if err != nil {
			return err
		}
		c.Installation.Methods = append(c.Installation.Methods, m)
	}
	return nil
}

// methodOf models one installation method.
func methodOf(it Item) (Method, error) {
	m := Method{Kind: it.Keys[0]}
	if len(it.Keys) > 1 || it.Value.Kind != kindObject {
		return m, fmt.Errorf("provider_installation: %s must be a block without labels", it.Name())
	}
	for _, a := range it.Value.Object {
		if m.Kind == DevOverrides {
			if len(a.Keys) != 1 || a.Value.Kind != String {
				return m, fmt.Errorf("dev_overrides: %s must be a provider address and a directory", a.Name())
			}
			m.Overrides = append(m.Overrides, Override{Provider: a.Keys[0], Dir: a.Value.Text})
			continue
		}
		if err := m.set(a); err != nil {
			return m, fmt.Errorf("%s: %w", m.Kind, err)
		}
	}
	return m, nil
}

// set takes one argument of a method other than dev_overrides.
func (m *Method) set(a Item) error {
	name := strings.Join(a.Keys, ".")
	switch name {
	case "path", "url", "repository_template":
		if a.Value.Kind != String {
			return fmt.Errorf("%s must be a string", name)
		}
		*map[string]*string{"path": &m.Path, "url": &m.URL, "repository_template": &m.RepositoryTemplate}[name] = a.Value.Text
	case "include", "exclude":
		list, ok := a.Value.Strings()
		if !ok {
			return fmt.Errorf("%s must be a list of strings", name)
		}
		if name == "include" {
			m.Include = list
		} else {
			m.Exclude = list
		}
	default:
		m.Other = append(m.Other, a)
	}
	return nil
}

// convertItem turns an HCL 1 item into a generic one.
func convertItem(it *ast.ObjectItem) (Item, error) {
	var out Item
	for _, k := range it.Keys {
		s, ok := k.Token.Value().(string)
		if !ok {
			return out, fmt.Errorf("key %s is not a name", k.Token.Text)
		}
		out.Keys = append(out.Keys, s)
	}
	if len(out.Keys) == 0 {
		return out, errors.New("an item without a key")
	}
	v, err := convertValue(it.Val)
	if err != nil {
		return out, fmt.Errorf("%s: %w", out.Name(), err)
	}
	out.Value = v
	return out, nil
}

func convertValue(n ast.Node) (Value, error) {
	switch n := n.(type) {
	case *ast.LiteralType:
		switch n.Token.Type {
		case token.STRING, token.HEREDOC:
			return str(n.Token.Value().(string)), nil
		case token.NUMBER, token.FLOAT:
			return Value{Kind: kindNumber, Text: n.Token.Text}, nil
		case token.BOOL:
			return Value{Kind: kindBool, Text: n.Token.Text}, nil
		}
		return Value{}, fmt.Errorf("unexpected %s", n.Token.Type)
	case *ast.ListType:
		v := Value{Kind: kindList, List: []Value{}}
		for _, e := range n.List {
			ev, err := convertValue(e)
			if err != nil {
				return Value{}, err
			}
			v.List = append(v.List, ev)
		}
		return v, nil
	case *ast.ObjectType:
		v := Value{Kind: kindObject, Object: []Item{}}
		for _, it := range n.List.Items {
			sub, err := convertItem(it)
			if err != nil {
				return Value{}, err
			}
			v.Object = append(v.Object, sub)
		}
		return v, nil
	}
	return Value{}, fmt.Errorf("unexpected %T", n)
}

// ReadCLIConfigs reads and merges the files OpenTofu merges (UserFiles), in that order. Any file
// that cannot be read or parsed is an error naming it: a configuration must not be written
// without it. Settings are merged as OpenTofu merges them into one file: a labelled block (a
// host's credentials) from a later file replaces an earlier one, a repeated attribute keeps the
// first, and more than one provider_installation is refused.
func ReadCLIConfigs(paths []string) (*CLIConfig, error) {
	merged := &CLIConfig{}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		c, err := ParseCLIConfig(p, src)
		if err != nil {
			return nil, err
		}
		if c.Installation != nil {
			if merged.Installation != nil {
				return nil, fmt.Errorf("%s and %s both have a provider_installation block: OpenTofu allows only one", merged.Installation.From, p)
			}
			merged.Installation = c.Installation
		}
		for _, it := range c.Settings {
			merged.addSetting(it)
		}
	}
	return merged, nil
}

// addSetting adds an item read from a later file.
func (c *CLIConfig) addSetting(it Item) {
	for i, old := range c.Settings {
		if old.Name() != it.Name() {
			continue
		}
		switch {
		case !it.IsBlock():
			return // the first file's attribute holds (plugin_cache_dir)
		case len(it.Keys) > 1:
			c.Settings[i] = it // a host's block: the later file's
			return
		}
	}
	c.Settings = append(c.Settings, it)
}
