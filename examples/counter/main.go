// Command terraform-provider-counter is oprov's second example provider. It is built on
// terraform-plugin-sdk/v2 and so speaks plugin protocol 5, with nested blocks, to exercise what
// the protocol-6 example does not.
package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-sdk/v2/diag"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"
	"github.com/hashicorp/terraform-plugin-sdk/v2/plugin"
)

func main() {
	plugin.Serve(&plugin.ServeOpts{ProviderFunc: provider})
}

func provider() *schema.Provider {
	return &schema.Provider{
		Schema: map[string]*schema.Schema{
			"start": {Type: schema.TypeInt, Optional: true, Description: "Where counting starts."},
		},
		ResourcesMap: map[string]*schema.Resource{
			"counter_tally": tally(),
		},
		DataSourcesMap: map[string]*schema.Resource{
			"counter_sum": sum(),
		},
		ConfigureContextFunc: func(_ context.Context, d *schema.ResourceData) (any, diag.Diagnostics) {
			return d.Get("start").(int), nil
		},
	}
}

func tally() *schema.Resource {
	return &schema.Resource{
		Description: "Counts the items it is given.",
		Schema: map[string]*schema.Schema{
			"items": {Type: schema.TypeList, Required: true, ForceNew: true, Elem: &schema.Schema{Type: schema.TypeString}, Description: "What to count."},
			"label": {Type: schema.TypeString, Optional: true, ForceNew: true, Sensitive: true},
			"total": {Type: schema.TypeInt, Computed: true, Description: "How many there are, plus the start."},
			"tags":  {Type: schema.TypeMap, Optional: true, ForceNew: true, Elem: &schema.Schema{Type: schema.TypeString}},
			"rule": {
				Type: schema.TypeList, Optional: true, ForceNew: true, MaxItems: 2,
				Elem: &schema.Resource{Schema: map[string]*schema.Schema{
					"name":   {Type: schema.TypeString, Required: true, ForceNew: true},
					"weight": {Type: schema.TypeInt, Optional: true, ForceNew: true, Default: 1},
				}},
			},
		},
		CreateContext: func(_ context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
			items := d.Get("items").([]any)
			d.SetId(fmt.Sprintf("tally-%d", len(items)))
			d.Set("total", len(items)+meta.(int))
			return nil
		},
		ReadContext:   func(context.Context, *schema.ResourceData, any) diag.Diagnostics { return nil },
		DeleteContext: func(context.Context, *schema.ResourceData, any) diag.Diagnostics { return nil },
	}
}

func sum() *schema.Resource {
	return &schema.Resource{
		Description: "Adds numbers.",
		Schema: map[string]*schema.Schema{
			"numbers": {Type: schema.TypeSet, Required: true, Elem: &schema.Schema{Type: schema.TypeInt}},
			"result":  {Type: schema.TypeInt, Computed: true},
		},
		ReadContext: func(_ context.Context, d *schema.ResourceData, _ any) diag.Diagnostics {
			total := 0
			var parts []string
			for _, n := range d.Get("numbers").(*schema.Set).List() {
				total += n.(int)
				parts = append(parts, fmt.Sprint(n))
			}
			d.SetId(strings.Join(parts, "+"))
			d.Set("result", total)
			return nil
		},
	}
}
