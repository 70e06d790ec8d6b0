// Package gofuzz holds the go-fuzz entry point (file gofuzz.go, build tag
// gofuzz): see that file. The native Go fuzz target doing the same is
// this package's FuzzSim.
package gofuzz
