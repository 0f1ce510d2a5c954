package module

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/manifest"
)

// registryBase finds a registry host's modules.v1 base URL: the Services override (a CLI
// configuration host block), or service discovery (https://HOST/.well-known/terraform.json).
func (w *walker) registryBase(ctx context.Context, host string) (*url.URL, error) {
	if b := w.bases[host]; b != nil {
		return b, nil
	}
	b, err := w.discover(ctx, host)
	if err != nil {
		return nil, err
	}
	if w.bases == nil {
		w.bases = map[string]*url.URL{}
	}
	w.bases[host] = b
	return b, nil
}

func (w *walker) discover(ctx context.Context, host string) (*url.URL, error) {
	disco := &url.URL{Scheme: "https", Host: host, Path: "/.well-known/terraform.json"}
	rel, ok := w.opts.Services[host]
	if !ok {
		var doc map[string]any
		if err := w.getJSON(ctx, disco, &doc); err != nil {
			return nil, fmt.Errorf("discovering %s's module registry: %w", host, err)
		}
		if rel, ok = doc["modules.v1"].(string); !ok {
			return nil, fmt.Errorf("%s offers no module registry (its .well-known/terraform.json has no modules.v1)", host)
		}
	}
	ref, err := url.Parse(rel)
	if err != nil {
		return nil, fmt.Errorf("%s: modules.v1 %q is not a URL", host, rel)
	}
	base := disco.ResolveReference(ref)
	if base.Scheme != "https" && !(base.Scheme == "http" && w.opts.Services[host] != "") {
		return nil, fmt.Errorf("%s: modules.v1 %s is not https", host, base.Redacted())
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	return base, nil
}

type registryVersions struct {
	Modules []struct {
		Versions []struct {
			Version string `json:"version"`
		} `json:"versions"`
	} `json:"modules"`
}

// registry resolves a registry module: the versions the registry offers, the one to use (the
// locked one while it meets the call's constraints, else the newest that does), and the package
// the download answer's location (X-Terraform-Get) points at, fetched as a git or HTTP source.
func (w *walker) registry(ctx context.Context, r *Resolved, src Source, e *LockEntry) (*fetched, error) {
	fail := func(err error) (*fetched, error) {
		return nil, fmt.Errorf("%s: %s: %s: %w", r.Where(), r.Call, r.Source, err)
	}
	pkg := src.Registry
	base, err := w.registryBase(ctx, pkg.Host.String())
	if err != nil {
		return fail(err)
	}
	modPath := path.Join(pkg.Namespace, pkg.Name, pkg.TargetSystem)
	var list registryVersions
	if err := w.getJSON(ctx, base.JoinPath(modPath, "versions"), &list); err != nil {
		return fail(err)
	}
	chosen, err := chooseVersion(r, list, e)
	if err != nil {
		return fail(err)
	}
	r.Version = chosen.String()
	loc, err := w.download(ctx, base.JoinPath(modPath, r.Version, "download"))
	if err != nil {
		return fail(fmt.Errorf("version %s: %w", r.Version, err))
	}
	inner, err := ParseSource(loc)
	if err != nil || (inner.Kind != KindGit && inner.Kind != kindHTTP) {
		return fail(fmt.Errorf("version %s: the registry's download location %q is not a git or HTTP(S) archive address", r.Version, loc))
	}
	if inner.Subdir != "" {
		r.Subdir = path.Join(inner.Subdir, src.Subdir)
	}
	if inner.Kind == KindGit {
		return w.git(ctx, r, inner)
	}
	return w.archive(ctx, r, inner, e)
}

// chooseVersion picks a registry module's version: the lock's while it meets the constraints
// (a lock that no longer does fails, asking for -upgrade), else the newest that meets them.
func chooseVersion(r *Resolved, list registryVersions, e *LockEntry) (versions.Version, error) {
	set, err := manifest.Constraints(r.Constraints)
	if err != nil {
		return versions.Unspecified, err
	}
	var offered versions.List
	for _, m := range list.Modules {
		for _, v := range m.Versions {
			pv, err := versions.ParseVersion(v.Version)
			if err != nil {
				return versions.Unspecified, fmt.Errorf("the registry offers a version %q that is not a version", v.Version)
			}
			offered = append(offered, pv)
		}
	}
	if e != nil {
		v, err := versions.ParseVersion(e.Version)
		if err != nil {
			return versions.Unspecified, fmt.Errorf("the module lock's version %q: %w", e.Version, err)
		}
		if !set.Has(v) {
			return versions.Unspecified, fmt.Errorf("the locked version %s does not meet the call's version %q: %w (run 'oprov lock --upgrade')", v, r.Constraints, errUpgrade)
		}
		for _, o := range offered {
			if o.Same(v) {
				return v, nil
			}
		}
		return versions.Unspecified, fmt.Errorf("the registry no longer offers the locked version %s (run 'oprov lock --upgrade' to pick another, and review it)", v)
	}
	if v := offered.NewestInSet(set); v != versions.Unspecified {
		return v, nil
	}
	have := make([]string, 0, len(offered))
	for _, v := range offered {
		have = append(have, v.String())
	}
	if len(have) == 0 {
		have = []string{"none"}
	}
	return versions.Unspecified, fmt.Errorf("no version meets %q (the registry offers: %s)", r.Constraints, strings.Join(have, ", "))
}

// download asks the registry where a version's package is: the X-Terraform-Get header of a 204
// (or 200) answer, or the location of a JSON answer, resolved against the download URL.
func (w *walker) download(ctx context.Context, u *url.URL) (string, error) {
	resp, body, err := w.get(ctx, u, maxJSON)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		return "", fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status)
	}
	loc := resp.Header.Get("X-Terraform-Get")
	if loc == "" && len(body) > 0 {
		var doc struct {
			Location string `json:"location"`
		}
		if jsonErr := jsonUnmarshal(body, &doc); jsonErr == nil {
			loc = doc.Location
		}
	}
	if loc == "" {
		return "", fmt.Errorf("GET %s: the answer gives no X-Terraform-Get location", u.Redacted())
	}
	return resolveLocation(resp.Request.URL, loc)
}

// resolveLocation resolves a download location that is a relative URL (./x, /x, ../x) against the
// URL it came from; addresses with a getter or a scheme are kept as they are.
func resolveLocation(from *url.URL, loc string) (string, error) {
	if strings.Contains(loc, "::") || strings.Contains(loc, "://") {
		return loc, nil
	}
	if !strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "./") && !strings.HasPrefix(loc, "../") {
		return loc, nil
	}
	rel, sub, err := splitSubdir(loc)
	if err != nil {
		return "", err
	}
	ref, err := url.Parse(rel)
	if err != nil {
		return "", fmt.Errorf("the download location %q is not a URL", loc)
	}
	abs := from.ResolveReference(ref)
	if sub == "" {
		return abs.String(), nil
	}
	base, q, ok := strings.Cut(abs.String(), "?")
	if ok {
		return base + "//" + sub + "?" + q, nil
	}
	return base + "//" + sub, nil
}
