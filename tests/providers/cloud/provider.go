package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type cloudProvider struct{}

func (*cloudProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "aws"
}

func (*cloudProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = pschema.Schema{}
}

func (*cloudProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (*cloudProvider) Resources(context.Context) []func() resource.Resource { return nil }

func (*cloudProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{func() datasource.DataSource { return &caller{} }}
}

// caller is data aws_caller: what this process found in each of a cloud SDK's three places.
type caller struct{}

type callerModel struct {
	Region      types.String `tfsdk:"region"`      // $AWS_REGION
	Metadata    types.String `tfsdk:"metadata"`    // the body $AWS_EC2_METADATA_SERVICE_ENDPOINT answers
	Credentials types.String `tfsdk:"credentials"` // ~/.aws/credentials
	Missing     types.String `tfsdk:"missing"`     // why each empty one is empty, one per line
}

func (*caller) Metadata(_ context.Context, _ datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = "aws_caller"
}

func (*caller) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dsschema.Schema{Attributes: map[string]dsschema.Attribute{
		"region":      dsschema.StringAttribute{Computed: true},
		"metadata":    dsschema.StringAttribute{Computed: true},
		"credentials": dsschema.StringAttribute{Computed: true},
		"missing":     dsschema.StringAttribute{Computed: true},
	}}
}

func (*caller) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m callerModel
	var missing []string
	m.Region = types.StringValue(os.Getenv("AWS_REGION"))
	if os.Getenv("AWS_REGION") == "" {
		missing = append(missing, "environment: no AWS_REGION")
	}
	md, err := metadata(ctx)
	if err != nil {
		missing = append(missing, "metadata: "+err.Error())
	}
	m.Metadata = types.StringValue(md)
	creds, err := credentials()
	if err != nil {
		missing = append(missing, "credentials: "+err.Error())
	}
	m.Credentials = types.StringValue(creds)
	m.Missing = types.StringValue(strings.Join(missing, "\n"))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// metadata asks the instance metadata endpoint, as an SDK does when nothing else gave it
// credentials.
func metadata(ctx context.Context) (string, error) {
	endpoint := os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
	if endpoint == "" {
		return "", fmt.Errorf("no AWS_EC2_METADATA_SERVICE_ENDPOINT")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/latest/meta-data/iam/security-credentials/", nil)
	if err != nil {
		return "", err
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer r.Body.Close()
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		return "", err
	}
	if r.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", req.URL, r.Status)
	}
	return strings.TrimSpace(string(body)), nil
}

// credentials reads ~/.aws/credentials of the account the provider runs as.
func credentials() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(home, ".aws", "credentials"))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
