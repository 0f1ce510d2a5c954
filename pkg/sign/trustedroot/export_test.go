package trustedroot

// MaxTrustedRootSize is the bound on the target, for the tests of it.
const MaxTrustedRootSize = maxTrustedRootSize
