//go:build !linux

package plugin

// The test hooks of remote_linger_test.go are Linux only; elsewhere nothing sets their variables.

func linger(string)                {}
func escape(string)                {}
func orphan(string)                {}
func farHost() int                 { return 2 }
func knock(string) int             { return 2 }
func sandboxedKnock(string) int    { return 2 }
func sandboxedImpostor(string) int { return 2 }
