module github.com/fanoutd/fanoutd/deploy/check

go 1.26.0

require (
	github.com/moby/profiles/seccomp v0.3.0
	github.com/opencontainers/runtime-spec v1.2.1
)

require golang.org/x/sys v0.47.0 // indirect
