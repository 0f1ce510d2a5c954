//go:build !linux

package plugin

import "time"

// The test hooks of remote_linger_test.go are Linux only; elsewhere nothing sets their variables.

func linger(string)                {}
func escape(string)                {}
func orphan(string)                {}
func farHost() int                 { return 2 }
func knock(string) int             { return 2 }
func prove(string) int             { return 2 }
func shareCommand(string) int      { return 2 }
func shareHold(string) int         { return 2 }
func shareLeave(string) int        { return 2 }
func sandboxedKnock(string) int    { return 2 }
func sandboxedImpostor(string) int { return 2 }

var brokerGrace time.Duration // the broker's, which only Linux runs
