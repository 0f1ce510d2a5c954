package main

// openFilesLimit: Windows sets no limit on a process's open handles that serve must fit.
func openFilesLimit() (uint64, bool) { return 0, false }
