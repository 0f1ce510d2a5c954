package protocol

import "fmt"

// Class is what a field that carries a value holds, as every surface of oprov must treat it.
type Class int

// The classes. A field's class decides how secret it is (Secrecy) and which schema, if any,
// describes its value (the Role).
const (
	unclassed        Class = iota
	Name                   // a resource, data source, function, action or state store's name, a state's id: routing
	Meta                   // versions, flags, limits, capabilities, deferrals, times, an import id
	diagnostics            // what went wrong or what is happening, as text for the user
	schemaInfo             // a description of types: schemas, functions' signatures, metadata
	ProviderConfig         // the provider's own configuration
	Config                 // a resource, data source, ephemeral resource, list, action or state store's configuration
	State                  // a managed resource's object, or a data source's result: prior, proposed, planned, new
	RawState               // a stored object as upgrade reads it: JSON by an older schema, or a legacy flatmap
	Private                // private state: bytes only the provider reads
	identity               // resource identity: data meant for comparing resources, with a schema of its own
	EphemeralResult        // an ephemeral resource's result: the secret it exists to keep out of state
	FunctionArgument       // a value passed to a provider function
	FunctionResult         // what a provider function returned
	MovedSource            // a cross-type move's source: another resource type's (or provider's) state
	providerMeta           // a module's provider_meta block: no schema oprov decodes
	stateBytes             // a state store's state: every secret of a configuration
	ListOption             // a list resource's options given as values (include_resource_object, limit)
	Container              // a message of the model's whose own fields carry the classes (an imported resource)
)

var classNames = [...]string{"unclassed", "name", "meta", "diagnostics", "schema", "provider configuration", "configuration",
	"state", "raw state", "private state", "identity", "ephemeral result", "function argument", "function result",
	"moved source", "provider meta", "state bytes", "list option", "container"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// Secrecy is how much of a value is secret: the one secret rule every surface applies.
type Secrecy int

const (
	Public        Secrecy = iota // nothing in it: names, flags, diagnostics, schemas
	BySchema                     // the attributes the schema marks sensitive or write-only (plugin.Block.Secret)
	AllAttributes                // every attribute, unless the user chose to keep them: the provider's configuration
	Whole                        // all of it: oprov cannot know what in it is secret, so it keeps none of it
)

// Secrecy gives the class's rule.
func (c Class) Secrecy() Secrecy {
	switch c {
	case Config, State, RawState:
		return BySchema
	case ProviderConfig:
		return AllAttributes
	case Private, EphemeralResult, FunctionArgument, FunctionResult, MovedSource, providerMeta, stateBytes, ListOption:
		return Whole
	case unclassed:
		return Whole // what the model does not describe is kept by no surface
	}
	return Public
}

// byType classes every field of a message type, wherever it appears.
var byType = map[string]Class{
	"Diagnostic": diagnostics, "FunctionError": diagnostics, "InvokeAction.Event.Progress": diagnostics, "InvokeAction.Event.Completed": diagnostics,
	"Schema": schemaInfo, "Function": schemaInfo, "ResourceIdentitySchema": schemaInfo, "ActionSchema": schemaInfo,
	"ServerCapabilities": Meta, "ClientCapabilities": Meta, "Deferred": Meta, "google.protobuf.Timestamp": Meta,
	"StateByteRange": Meta, "StateStoreClientCapabilities": Meta, "StateStoreServerCapabilities": Meta,
	"GetMetadata.DataSourceMetadata": schemaInfo, "GetMetadata.ResourceMetadata": schemaInfo,
	"GetMetadata.FunctionMetadata": schemaInfo, "GetMetadata.EphemeralResourceMetadata": schemaInfo,
	"GetMetadata.ListResourceMetadata": schemaInfo, "GetMetadata.StateStoreMetadata": schemaInfo,
	"GetMetadata.ActionMetadata": schemaInfo, "RequestChunkMeta": Name, "AttributePath": Meta,
}

// byField classes the fields of the methods' own messages, by "Message.field". A field whose
// message type has a class in byType needs no entry; ResourceIdentityData and RawState fields
// are classed here, where the field says what they hold.
var byField = map[string]Class{
	"GetProviderSchema.Response.provider": schemaInfo, "GetProviderSchema.Response.resource_schemas": schemaInfo,
	"GetProviderSchema.Response.data_source_schemas": schemaInfo, "GetProviderSchema.Response.functions": schemaInfo,
	"GetProviderSchema.Response.ephemeral_resource_schemas": schemaInfo, "GetProviderSchema.Response.list_resource_schemas": schemaInfo,
	"GetProviderSchema.Response.state_store_schemas": schemaInfo, "GetProviderSchema.Response.action_schemas": schemaInfo,
	"GetProviderSchema.Response.provider_meta": schemaInfo, "GetFunctions.Response.functions": schemaInfo,
	"GetResourceIdentitySchemas.Response.identity_schemas": schemaInfo,

	"ValidateProviderConfig.Request.config": ProviderConfig, "PrepareProviderConfig.Request.config": ProviderConfig,
	"PrepareProviderConfig.Response.prepared_config": ProviderConfig,
	"ConfigureProvider.Request.terraform_version":    Meta, "ConfigureProvider.Request.config": ProviderConfig,
	"Configure.Request.terraform_version": Meta, "Configure.Request.config": ProviderConfig,

	"ValidateResourceConfig.Request.type_name": Name, "ValidateResourceConfig.Request.config": Config,
	"ValidateResourceTypeConfig.Request.type_name": Name, "ValidateResourceTypeConfig.Request.config": Config,
	"ValidateDataResourceConfig.Request.type_name": Name, "ValidateDataResourceConfig.Request.config": Config,
	"ValidateDataSourceConfig.Request.type_name": Name, "ValidateDataSourceConfig.Request.config": Config,
	"ValidateEphemeralResourceConfig.Request.type_name": Name, "ValidateEphemeralResourceConfig.Request.config": Config,
	"ValidateListResourceConfig.Request.type_name": Name, "ValidateListResourceConfig.Request.config": Config,
	"ValidateListResourceConfig.Request.include_resource_object": ListOption, "ValidateListResourceConfig.Request.limit": ListOption,
	"ValidateStateStoreConfig.Request.type_name": Name, "ValidateStateStoreConfig.Request.config": Config,
	"ValidateActionConfig.Request.action_type": Name, "ValidateActionConfig.Request.config": Config,

	"UpgradeResourceState.Request.type_name": Name, "UpgradeResourceState.Request.version": Meta,
	"UpgradeResourceState.Request.raw_state": RawState, "UpgradeResourceState.Response.upgraded_state": State,
	"UpgradeResourceIdentity.Request.type_name": Name, "UpgradeResourceIdentity.Request.version": Meta,
	"UpgradeResourceIdentity.Request.raw_identity": identity, "UpgradeResourceIdentity.Response.upgraded_identity": identity,

	"ReadResource.Request.type_name": Name, "ReadResource.Request.current_state": State, "ReadResource.Request.private": Private,
	"ReadResource.Request.provider_meta": providerMeta, "ReadResource.Request.current_identity": identity,
	"ReadResource.Response.new_state": State, "ReadResource.Response.private": Private, "ReadResource.Response.new_identity": identity,

	"PlanResourceChange.Request.type_name": Name, "PlanResourceChange.Request.prior_state": State,
	"PlanResourceChange.Request.proposed_new_state": State, "PlanResourceChange.Request.config": Config,
	"PlanResourceChange.Request.prior_private": Private, "PlanResourceChange.Request.provider_meta": providerMeta,
	"PlanResourceChange.Request.prior_identity": identity,
	"PlanResourceChange.Response.planned_state": State, "PlanResourceChange.Response.requires_replace": Meta,
	"PlanResourceChange.Response.planned_private": Private, "PlanResourceChange.Response.legacy_type_system": Meta,
	"PlanResourceChange.Response.planned_identity": identity,

	"ApplyResourceChange.Request.type_name": Name, "ApplyResourceChange.Request.prior_state": State,
	"ApplyResourceChange.Request.planned_state": State, "ApplyResourceChange.Request.config": Config,
	"ApplyResourceChange.Request.planned_private": Private, "ApplyResourceChange.Request.provider_meta": providerMeta,
	"ApplyResourceChange.Request.planned_identity": identity,
	"ApplyResourceChange.Response.new_state":       State, "ApplyResourceChange.Response.private": Private,
	"ApplyResourceChange.Response.legacy_type_system": Meta, "ApplyResourceChange.Response.new_identity": identity,

	"ImportResourceState.Request.type_name": Name, "ImportResourceState.Request.id": Meta,
	"ImportResourceState.Request.identity":           identity,
	"ImportResourceState.ImportedResource.type_name": Name, "ImportResourceState.ImportedResource.state": State,
	"ImportResourceState.ImportedResource.private": Private, "ImportResourceState.ImportedResource.identity": identity,

	"MoveResourceState.Request.source_provider_address": Name, "MoveResourceState.Request.source_type_name": Name,
	"MoveResourceState.Request.source_schema_version": Meta, "MoveResourceState.Request.source_state": MovedSource,
	"MoveResourceState.Request.target_type_name": Name, "MoveResourceState.Request.source_private": MovedSource,
	"MoveResourceState.Request.source_identity": MovedSource, "MoveResourceState.Request.source_identity_schema_version": Meta,
	"MoveResourceState.Response.target_state": State, "MoveResourceState.Response.target_private": Private,
	"MoveResourceState.Response.target_identity": identity,

	"ReadDataSource.Request.type_name": Name, "ReadDataSource.Request.config": Config,
	"ReadDataSource.Request.provider_meta": providerMeta, "ReadDataSource.Response.state": State,

	"GenerateResourceConfig.Request.type_name": Name, "GenerateResourceConfig.Request.state": State,
	"GenerateResourceConfig.Response.config": Config,

	"OpenEphemeralResource.Request.type_name": Name, "OpenEphemeralResource.Request.config": Config,
	"OpenEphemeralResource.Response.result": EphemeralResult, "OpenEphemeralResource.Response.private": Private,
	"RenewEphemeralResource.Request.type_name": Name, "RenewEphemeralResource.Request.private": Private,
	"RenewEphemeralResource.Response.private":  Private,
	"CloseEphemeralResource.Request.type_name": Name, "CloseEphemeralResource.Request.private": Private,

	"ListResource.Request.type_name": Name, "ListResource.Request.config": Config,
	"ListResource.Request.include_resource_object": Meta, "ListResource.Request.limit": Meta,
	"ListResource.Event.identity": identity, "ListResource.Event.display_name": Meta, "ListResource.Event.resource_object": State,

	"CallFunction.Request.name": Name, "CallFunction.Request.arguments": FunctionArgument,
	"CallFunction.Response.result": FunctionResult,

	"ConfigureStateStore.Request.type_name": Name, "ConfigureStateStore.Request.config": Config,
	"ReadStateBytes.Request.type_name": Name, "ReadStateBytes.Request.state_id": Name,
	"ReadStateBytes.ResponseChunk.bytes": stateBytes, "ReadStateBytes.ResponseChunk.total_length": Meta,
	"WriteStateBytes.RequestChunk.bytes": stateBytes, "WriteStateBytes.RequestChunk.total_length": Meta,
	"LockState.Request.type_name": Name, "LockState.Request.state_id": Name, "LockState.Request.operation": Meta,
	"LockState.Response.lock_id":    Meta,
	"UnlockState.Request.type_name": Name, "UnlockState.Request.state_id": Name, "UnlockState.Request.lock_id": Meta,
	"GetStates.Request.type_name": Name, "GetStates.Response.state_ids": Name,
	"DeleteState.Request.type_name": Name, "DeleteState.Request.state_id": Name,

	"PlanAction.Request.action_type": Name, "PlanAction.Request.config": Config,
	"InvokeAction.Request.action_type": Name, "InvokeAction.Request.config": Config,

	"StopProvider.Response.Error": diagnostics, "Stop.Response.Error": diagnostics,
}

// classOf gives the class of field f of message msg (a method's message or one inside it): the
// field's own entry, else its message type's, else unclassed.
func classOf(msg string, f *Field) Class {
	if c, ok := byField[msg+"."+f.Name]; ok {
		return c
	}
	if c, ok := byType[f.Type]; ok {
		return c
	}
	if valueTypes[f.Type] {
		return unclassed // a value's class is its field's: it says what the value is
	}
	for _, major := range []int{6, 5} {
		if Published(major).Message(f.Type) != nil {
			return Container
		}
	}
	return unclassed
}

// valueTypes are the messages that carry a value: a field of one of them has a class of its own,
// never its fields'.
var valueTypes = map[string]bool{"DynamicValue": true, "RawState": true, "ResourceIdentityData": true}

// ClassWithin gives the class of field f of message msg reached through a field of class parent:
// a field with no class of its own inside a classed message (a Diagnostic's summary, a function
// signature's parameters) has its container's.
func ClassWithin(parent Class, msg string, f *Field) Class {
	c := classOf(msg, f)
	if (c == unclassed || c == Container) && parent != unclassed && parent != Container {
		return parent
	}
	return c
}
