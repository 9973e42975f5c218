// Package check holds the deploy/ tests that need the container, seccomp
// and Kubernetes libraries: a module of its own, so fanoutd's go.mod does
// not carry them. Run with deploy/ci.sh.
package check
