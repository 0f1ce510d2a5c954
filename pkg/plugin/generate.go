package plugin

//go:generate bash gen.sh
